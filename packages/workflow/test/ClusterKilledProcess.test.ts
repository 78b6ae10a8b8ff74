/**
 * `KilledProcess.test.ts` on `@effect/cluster`'s `ClusterWorkflowEngine`: the engine's messages,
 * replies and shard locks, the idempotency records and the bank's tables in one PostgreSQL database
 * of the test's own (on the `TEST_PG_URL` server, or a PGlite of its own when it is unset). A child
 * process (`utils/clusterCheckoutChild.ts`) is killed with SIGKILL; a second one starts the runner
 * and only polls: the engine finds the unprocessed `run` and `activity` requests in its message
 * storage when it acquires their shard and delivers them again.
 */
import * as Children from "@effect-idempotency/test-support/Children"
import * as Postgres from "@effect-idempotency/test-support/Postgres"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"

const CHILD = fileURLToPath(new URL("./utils/clusterCheckoutChild.ts", import.meta.url))

/** A database of the test's own, dropped with the scope: created on the server, or a fresh PGlite. */
const freshDatabase = Effect.gen(function*() {
  if (Postgres.serverUrl === undefined) return yield* Postgres.pglite()
  const name = `wf_cluster_${randomUUID().replaceAll("-", "").slice(0, 12)}`
  const admin = yield* PgClient.make({ url: Redacted.make(Postgres.serverUrl), maxConnections: 1 })
  yield* Effect.acquireRelease(
    admin.unsafe(`CREATE DATABASE ${name}`),
    () => Effect.ignore(admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  )
  const url = new URL(Postgres.serverUrl)
  url.pathname = `/${name}`
  return Postgres.server(url.toString())
}).pipe(Effect.provide(Reactivity.layer))

/** The test's database with the bank's tables, and the client the test reads it with. */
const database = Effect.gen(function*() {
  const { kind, url } = yield* freshDatabase
  const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
  yield* sql`CREATE TABLE charges (charge_id text PRIMARY KEY, order_id text NOT NULL, amount_cents integer NOT NULL, idempotency_key text NOT NULL)`
  yield* sql`CREATE TABLE receipts (order_id text NOT NULL, charge_id text NOT NULL)`
  return { sql, child: (...args: ReadonlyArray<string>) => Children.runUntilMarker(CHILD, [url, kind, ...args]) }
}).pipe(Effect.provide(Reactivity.layer))

const rows = (sql: SqlClient.SqlClient) =>
  Effect.all({
    charges: sql<{ readonly charge_id: string }>`SELECT charge_id FROM charges ORDER BY charge_id`,
    receipts: sql<{ readonly charge_id: string }>`SELECT charge_id FROM receipts`,
    // the engine's requests: whether each got its reply saved
    requests: sql<{ readonly id: string; readonly tag: string; readonly processed: boolean }>`
      SELECT id::text AS id, tag, processed FROM cluster_messages ORDER BY tag`
  })

describe("a cluster workflow process killed with SIGKILL", () => {
  it.scoped(
    "after the activity charged and before the engine saved its result: the redelivered activity replays, one charge",
    () =>
      Effect.gen(function*() {
        const { child, sql } = yield* database
        assert.strictEqual(
          yield* child("order-1", "idempotent", "after-charge"),
          "PAUSED after-charge (SIGKILL)"
        )
        const killed = yield* rows(sql)
        assert.strictEqual(killed.charges.length, 1)
        assert.deepStrictEqual(killed.receipts, [])
        assert.deepStrictEqual(killed.requests.map(({ processed, tag }) => [tag, processed]), [
          ["activity", false],
          ["run", false]
        ])
        assert.match(yield* child("order-1", "idempotent", "resume"), /^DONE/)
        const { charges, receipts, requests } = yield* rows(sql)
        assert.deepStrictEqual(charges, killed.charges)
        assert.deepStrictEqual(receipts, killed.charges)
        // the same two requests, now answered: redelivered, not sent again
        assert.deepStrictEqual(requests, killed.requests.map((request) => ({ ...request, processed: true })))
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "after the activity charged: executing the workflow again under its key waits for the same execution, one charge",
    () =>
      Effect.gen(function*() {
        const { child, sql } = yield* database
        assert.strictEqual(
          yield* child("order-1", "idempotent", "after-charge"),
          "PAUSED after-charge (SIGKILL)"
        )
        const killed = yield* rows(sql)
        assert.match(yield* child("order-1", "idempotent", "execute"), /^DONE/)
        const { charges, receipts, requests } = yield* rows(sql)
        assert.deepStrictEqual(charges, killed.charges)
        assert.deepStrictEqual(receipts, killed.charges)
        // the run request saved again is a duplicate of the first: no third request
        assert.deepStrictEqual(requests, killed.requests.map((request) => ({ ...request, processed: true })))
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "after a plain Activity charged and before the engine saved its result: the redelivered activity charges again",
    () =>
      Effect.gen(function*() {
        const { child, sql } = yield* database
        assert.strictEqual(
          yield* child("order-1", "plain", "after-charge"),
          "PAUSED after-charge (SIGKILL)"
        )
        assert.strictEqual((yield* rows(sql)).charges.length, 1)
        assert.match(yield* child("order-1", "plain", "resume"), /^DONE/)
        const { charges, receipts } = yield* rows(sql)
        assert.strictEqual(charges.length, 2)
        assert.strictEqual(receipts.length, 1)
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "inside the activity, before it charged: the redelivered activity takes the key over when its lease ends, one charge",
    () =>
      Effect.gen(function*() {
        const { child, sql } = yield* database
        assert.strictEqual(
          yield* child("order-2", "idempotent", "inside-charge"),
          "PAUSED inside-charge (SIGKILL)"
        )
        assert.deepStrictEqual((yield* rows(sql)).charges, [])
        assert.match(yield* child("order-2", "idempotent", "resume"), /^DONE/)
        const { charges, receipts } = yield* rows(sql)
        assert.strictEqual(charges.length, 1)
        assert.deepStrictEqual(receipts, charges)
      }),
    { timeout: 120_000 }
  )
})
