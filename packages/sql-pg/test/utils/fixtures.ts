import { StoreFixtures } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Pg from "pg"

/** Reservation requests and the assertions on results and exits: the testing kit's. */
export const { expectExisting, expectReserved, failureOf, FP_A, FP_B, reserveRequest } = StoreFixtures

/** A record id with a random key, under `operation`. */
export const freshId = (operation = "sql-pg-test") => StoreFixtures.freshId({ operation })

export const Payload = Schema.Struct({ amount: Schema.Number, currency: Schema.String })

export const payload = { amount: 10, currency: "EUR" } as const

/** A plain `pg` connection outside the store's pool (to hold locks, or to terminate backends). */
export const rawClient = (url: string, applicationName: string): Effect.Effect<Pg.Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const client = new Pg.Client({ connectionString: url, application_name: applicationName })
      client.on("error", () => {})
      return Effect.as(Effect.promise(() => client.connect()), client)
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

export const rawQuery = (client: Pg.Client, text: string, params?: ReadonlyArray<unknown>) =>
  Effect.promise(() => client.query(text, params as Array<unknown> | undefined))

/** The database's clock, in epoch milliseconds (as the store computes it). */
export const DB_NOW = "floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint"

/** The transactional tests' count of a key: its rows in `orders` and its records in `records` (qualified). */
export const transactionalCounts = (orders: string, records: string) => (key: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{ readonly n: number }>(`SELECT count(*)::int AS n FROM ${orders} WHERE key = $1`, [
      key
    ])
    const found = yield* sql.unsafe<{ readonly n: number; readonly status: string | null }>(
      `SELECT count(*)::int AS n, max(status) AS status FROM ${records} WHERE key = $1`,
      [key]
    )
    return { orders: rows[0]!.n, records: found[0]!.n, status: found[0]!.status }
  })
