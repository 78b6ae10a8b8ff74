/**
 * What the test Worker runs inside workerd on a `SqlClient` over D1 or over a Durable Object's
 * storage, and answers as JSON: the shared suites' checks (`StoreConformance` on the fiber's clock
 * and on the database's, `AdminConformance`), the client's own checks, and one reservation of a race
 * that the test sends as concurrent requests.
 *
 * The test imports this module too, for the checks' names.
 */
import { IdempotencyAdmin, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyMigration, SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as AdminConformance from "@effect-idempotency/testing/AdminConformance"
import * as StoreConformance from "@effect-idempotency/testing/StoreConformance"
import { freshId, reserveRequest } from "@effect-idempotency/testing/StoreFixtures"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as TestContext from "effect/TestContext"

/** One check: it fails when the store or the client breaks the rule it names. */
export interface Check {
  readonly name: string
  readonly run: Effect.Effect<void, unknown, SqlClient.SqlClient>
}

/** The suites, by name. */
export type Suite = "store" | "store-database-clock" | "admin" | "client"

/** The answer of the Worker: whether the check passed, and its failure (or the race's result). */
export interface Answer {
  readonly ok: boolean
  readonly name: string
  readonly details: unknown
}

/** What one reservation of a race found. */
export interface RaceResult {
  readonly result: "Reserved" | "Existing"
  readonly status: IdempotencyRecord.Status | undefined
  /** The token of the record's holder: the request's own when it reserved. */
  readonly token: string
}

/** Moves the database's clock forward for one table: every timestamp of the table moves back. */
const shiftBack = (sql: SqlClient.SqlClient, table: string, duration: Duration.Duration) => {
  const millis = Math.ceil(Duration.toMillis(duration))
  const statement = `UPDATE "${table}" SET lease_until = lease_until - ?, expires_at = expires_at - ?`
  return sql.unsafe(statement, [millis, millis]).withoutTransform.pipe(Effect.orDie, Effect.asVoid)
}

/** `StoreConformance`'s checks on a table, on the fiber's clock (`TestClock`) or on the database's. */
const storeSuite = (table: string, clock: IdempotencyStore.ClockSource): ReadonlyArray<Check> =>
  StoreConformance.checks().map(({ name }, index) => ({
    name,
    run: Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* SqlIdempotencyStore.make({ table, clock, migrate: true })
      const checks = clock === "effect"
        ? StoreConformance.checks()
        : StoreConformance.checks({ advance: (duration) => shiftBack(sql, table, duration) })
      yield* Effect.provideService(checks[index]!.run, IdempotencyStore.IdempotencyStore, store)
    })
  }))

const adminSuite = (table: string): ReadonlyArray<Check> =>
  AdminConformance.checks().map(({ name, run }) => ({
    name,
    run: Effect.gen(function*() {
      const store = yield* SqlIdempotencyStore.make({ table, clock: "effect", migrate: true })
      yield* run.pipe(
        Effect.provide(IdempotencyAdmin.layer),
        Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      )
    })
  }))

/** A table of the check's own. */
const freshTable = (name: string) => `${name}_${crypto.randomUUID().slice(0, 8)}`

const clientSuite: ReadonlyArray<Check> = [
  {
    name: "withTransaction and reserve fail with an SqlError, and the transaction's statement does not run",
    run: Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = freshTable("client_tx")
      yield* sql.unsafe(`CREATE TABLE "${table}" (id TEXT PRIMARY KEY)`)
      const refused = yield* Effect.flip(
        sql.withTransaction(sql.unsafe(`INSERT INTO "${table}" (id) VALUES (?)`, ["a"]))
      )
      assert.strictEqual(refused._tag, "SqlError")
      assert.match(refused.message, /transaction/)
      const reserved = yield* Effect.flip(Effect.scoped(sql.reserve))
      assert.strictEqual(reserved._tag, "SqlError")
      assert.deepStrictEqual(yield* sql.unsafe(`SELECT count(*) AS n FROM "${table}"`), [{ n: 0 }])
    })
  },
  {
    name: "statements answer rows, values and a stream; .raw the rows changed; booleans are bound as 1 and 0",
    run: Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = freshTable("client_raw")
      yield* sql.unsafe(`CREATE TABLE "${table}" (id TEXT PRIMARY KEY, v INTEGER NOT NULL)`)
      const changes = (statement: string, params: ReadonlyArray<unknown>) =>
        Effect.map(sql.unsafe(statement, params).raw, (raw) => (raw as { readonly changes: number }).changes)
      assert.strictEqual(
        yield* changes(`INSERT INTO "${table}" (id, v) VALUES (?, ?), (?, ?), (?, ?)`, ["a", 1, "b", 2, "c", 3]),
        3
      )
      assert.strictEqual(yield* changes(`UPDATE "${table}" SET v = v + 10 WHERE v >= ?`, [2]), 2)
      assert.strictEqual(yield* changes(`SELECT id FROM "${table}"`, []), 0)
      const select = sql`SELECT id, v FROM ${sql(table)} ORDER BY id`
      const rows = [{ id: "a", v: 1 }, { id: "b", v: 12 }, { id: "c", v: 13 }]
      assert.deepStrictEqual(yield* select, rows)
      assert.deepStrictEqual(yield* select.values, [["a", 1], ["b", 12], ["c", 13]])
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Stream.runCollect(select.stream)), rows)
      assert.deepStrictEqual(yield* sql`SELECT ${true} AS yes, ${false} AS no`, [{ yes: 1, no: 0 }])
    })
  },
  {
    name: "a failing statement is an SqlError that keeps the binding's error; a missing table is NotMigrated",
    run: Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const failed = yield* Effect.flip(sql`SELECT * FROM no_such_table`)
      assert.strictEqual(failed._tag, "SqlError")
      assert.instanceOf(failed.cause, Error)
      assert.match((failed.cause as Error).message, /no such table/)
      // a store on a table that was never created
      const store = yield* SqlIdempotencyStore.make({ table: "no_such_records" })
      const error = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
      assert.strictEqual(error._tag, "StoreError")
      assert.strictEqual(error.method, "reserve")
      // that says to migrate
      assert.isTrue(SqlIdempotencyMigration.isNotMigrated(error))
      assert.include(error.message, "migrate: true")
      const cause = error.cause as { readonly _tag: string; readonly cause: unknown }
      assert.strictEqual(cause._tag, "SqlError")
      assert.instanceOf(cause.cause, Error)
      assert.match((cause.cause as Error).message, /no such table/)
    })
  }
]

/** The suites; their checks are built on demand, never in a Worker's global scope. */
export const suites = (): Record<Suite, ReadonlyArray<Check>> => ({
  "store": storeSuite("idem_store", "effect"),
  "store-database-clock": storeSuite("idem_store_db", "server"),
  "admin": adminSuite("idem_admin"),
  "client": clientSuite
})

const isSuite = (name: string): name is Suite => name in suites()

/** The table of the races, on the database's clock, as a deployed store runs. */
const RACE_TABLE = "idem_race"

/** One reservation of `key` in a race: what it found. */
const race = (key: string): Effect.Effect<RaceResult, unknown, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const store = yield* SqlIdempotencyStore.make({ table: RACE_TABLE, migrate: true })
    const id = IdempotencyRecord.makeRecordId({ operation: "race", key: IdempotencyKey.unsafeMake(key) })
    const request = reserveRequest(id)
    const result = yield* store.reserve(request)
    return result._tag === "Reserved"
      ? { result: "Reserved", status: undefined, token: request.token }
      : { result: "Existing", status: result.record.status, token: result.record.token }
  })

/** The environment of a check, as `it.effect` gives it: `TestClock`, and no default logger. */
const TestEnv = TestContext.TestContext.pipe(Layer.provide(Logger.remove(Logger.defaultLogger)))

const json = (answer: Answer, status = 200): Response => Response.json(answer, { status })

const run = <A>(
  name: string,
  effect: Effect.Effect<A, unknown, SqlClient.SqlClient>,
  client: Layer.Layer<SqlClient.SqlClient>
): Promise<Response> =>
  Effect.runPromiseExit(Effect.provide(effect, client)).then((exit) =>
    Exit.isSuccess(exit)
      ? json({ ok: true, name, details: exit.value ?? null })
      : json({ ok: false, name, details: Cause.pretty(exit.cause) })
  )

/**
 * Answers a request of the test on `client`:
 *
 * - `GET /<binding>/suites`: the checks' names, by suite;
 * - `POST /<binding>/check/<suite>/<index>`: runs one check, with `TestClock` as the fiber's clock;
 * - `POST /<binding>/race/<key>`: one reservation of `key`, on the live clock.
 */
export const handle = (request: Request, client: Layer.Layer<SqlClient.SqlClient>): Promise<Response> => {
  const [, action, ...rest] = new URL(request.url).pathname.split("/").filter((part) => part !== "")
  if (action === "suites") {
    const names = Object.fromEntries(
      Object.entries(suites()).map(([suite, checks]) => [suite, checks.map((c) => c.name)])
    )
    return Promise.resolve(json({ ok: true, name: "suites", details: names }))
  }
  if (action === "check" && rest.length === 2 && isSuite(rest[0]!)) {
    const check = suites()[rest[0]!][Number(rest[1])]
    if (check !== undefined) return run(check.name, Effect.provide(check.run, TestEnv), client)
  }
  if (action === "race" && rest.length === 1) {
    return run("race", race(decodeURIComponent(rest[0]!)), client)
  }
  return Promise.resolve(json({ ok: false, name: "unknown", details: `no route ${request.url}` }, 404))
}
