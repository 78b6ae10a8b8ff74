/**
 * The store's layers as an application wires them: options from `Config` (`layerConfig`), the
 * migration run by the layer itself (`migrate: true`), also by many instances starting at once on
 * the server, and the plain SQL script with its default table.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { Timing } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { expectExisting, expectReserved, freshId, reserveRequest } from "./utils/fixtures.js"
import { dropTable, layerClient, layerPrimary, runTable, TestDatabase } from "./utils/TestDatabase.js"

const CONFIG_TABLE = runTable("idem_layer_config")
const MIGRATE_TABLE = runTable("idem_layer_migrate")
const RACE_TABLE = runTable("idem_layer_race")

const Live = layerClient().pipe(Layer.provideMerge(layerPrimary))

const exec = (text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text).withoutTransform)

const exists = (table: string) =>
  Effect.map(
    exec(
      `SELECT (to_regclass('"${table}"') IS NOT NULL AND to_regproc('"${table}_reserve"') IS NOT NULL) AS ok`
    ),
    (rows) => rows[0]!.ok === true
  )

/** Reserve, complete and replay on a store. */
const roundTrip = (store: IdempotencyStore.IdempotencyStore["Type"]) =>
  Effect.gen(function*() {
    const id = freshId()
    const first = expectReserved(yield* store.reserve(reserveRequest(id)))
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "42" })
    yield* store.complete({ id, token: first.token, outcome, ttl: Duration.hours(1) })
    assert.deepStrictEqual(expectExisting(yield* store.reserve(reserveRequest(id))).record.outcome, outcome)
    return { id, expiresAt: first.expiresAt }
  })

const build = <E>(layer: Layer.Layer<IdempotencyStore.IdempotencyStore, E, SqlClient.SqlClient>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, IdempotencyStore.IdempotencyStore))

const fromMap = (entries: ReadonlyArray<readonly [string, string]>) => ConfigProvider.fromMap(new Map(entries))

const configured = PgIdempotencyStore.layerConfig({
  table: Config.string("IDEMPOTENCY_TABLE"),
  clock: Config.literal("server", "effect")("IDEMPOTENCY_CLOCK"),
  migrate: Config.boolean("IDEMPOTENCY_MIGRATE").pipe(Config.withDefault(false)),
  purgeInterval: Config.option(Config.duration("IDEMPOTENCY_PURGE_INTERVAL")).pipe(
    Config.map((interval) => interval._tag === "Some" ? interval.value : undefined)
  )
})

describe("PgIdempotencyMigration.toSql", () => {
  it("names the default table when called with nothing, as plain JavaScript calls it", () => {
    const script = PgIdempotencyMigration.toSql()
    assert.isTrue(script.startsWith(`CREATE TABLE IF NOT EXISTS "${PgIdempotencyTable.DEFAULT_NAME}" (`))
    assert.notInclude(script, "undefined")
    const untyped = PgIdempotencyMigration.toSql as (table?: unknown) => string
    assert.strictEqual(untyped(undefined), script)
  })

  it("takes table options, as the migration does, or a validated table", () => {
    const script = PgIdempotencyMigration.toSql({ table: "payments_idempotency", schema: "billing" })
    assert.isTrue(script.startsWith(`CREATE TABLE IF NOT EXISTS "billing"."payments_idempotency" (`))
    assert.include(script, `CREATE OR REPLACE FUNCTION "billing"."payments_idempotency_reserve"(`)
    assert.notInclude(script, "undefined")
    const table = PgIdempotencyTable.make({ table: "payments_idempotency", schema: "billing" })
    assert.strictEqual(table._tag, "Right")
    if (table._tag === "Right") assert.strictEqual(PgIdempotencyMigration.toSql(table.right), script)
    assert.strictEqual(PgIdempotencyMigration.toSql({}), PgIdempotencyMigration.toSql())
  })

  it("throws InvalidTableName for an invalid name instead of emitting SQL", () => {
    assert.throws(
      () => PgIdempotencyMigration.toSql({ table: "bad name" }),
      PgIdempotencyTable.InvalidTableName
    )
  })
})

layer(Live, { timeout: "2 minutes" })("PgIdempotencyStore layers", (it) => {
  it.scoped("migrate: true creates the table and its function when the layer is built, and runs again harmlessly", () =>
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => Effect.ignore(dropTable({ table: MIGRATE_TABLE })))
      yield* dropTable({ table: MIGRATE_TABLE })
      assert.isFalse(yield* exists(MIGRATE_TABLE))
      // without the option, the layer builds but the first reservation finds no function
      const plain = yield* build(PgIdempotencyStore.layerWith({ table: MIGRATE_TABLE }))
      assert.strictEqual((yield* Effect.flip(plain.reserve(reserveRequest(freshId()))))._tag, "StoreError")
      const store = yield* build(PgIdempotencyStore.layerWith({ table: MIGRATE_TABLE, migrate: true }))
      assert.isTrue(yield* exists(MIGRATE_TABLE))
      const first = yield* roundTrip(store)
      // a second instance migrates again: the records stay
      const again = yield* build(PgIdempotencyStore.layerWith({ table: MIGRATE_TABLE, migrate: true }))
      assert.strictEqual((yield* again.get(first.id))._tag, "Some")
      yield* roundTrip(again)
      const rows = yield* exec(`SELECT count(*)::integer AS n FROM "${MIGRATE_TABLE}"`)
      assert.strictEqual(rows[0]!.n, 2)
    }))

  it.scoped("many instances starting at once with migrate: true all build, on pools of their own", () =>
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => Effect.ignore(dropTable({ table: RACE_TABLE })))
      const database = Layer.succeed(TestDatabase, yield* TestDatabase)
      for (let round = 0; round < 3; round++) {
        yield* dropTable({ table: RACE_TABLE })
        const instances = yield* Effect.all(
          Array.from({ length: 8 }, () =>
            Effect.exit(
              build(
                PgIdempotencyStore.layerWith({ table: RACE_TABLE, migrate: true }).pipe(
                  Layer.provide(layerClient({ maxConnections: 1 })),
                  Layer.provide(database)
                )
              )
            )),
          { concurrency: "unbounded" }
        )
        for (const instance of instances) {
          assert.isTrue(Exit.isSuccess(instance), Exit.isFailure(instance) ? String(instance.cause) : "")
          if (Exit.isSuccess(instance)) yield* roundTrip(instance.value)
        }
      }
    }))

  it.scoped("layerConfig reads the table, the clock, the migration and the purge from the ConfigProvider", () =>
    Effect.gen(function*() {
      yield* Effect.addFinalizer(() => Effect.ignore(dropTable({ table: CONFIG_TABLE })))
      yield* dropTable({ table: CONFIG_TABLE })
      const store = yield* build(configured).pipe(
        Effect.withConfigProvider(fromMap([
          ["IDEMPOTENCY_TABLE", CONFIG_TABLE],
          ["IDEMPOTENCY_CLOCK", "effect"],
          ["IDEMPOTENCY_MIGRATE", "true"],
          ["IDEMPOTENCY_PURGE_INTERVAL", "1 minute"]
        ]))
      )
      assert.isTrue(yield* exists(CONFIG_TABLE))
      // the fiber's clock (TestClock, at 0) decides expiry, not the server's
      const first = yield* roundTrip(store)
      assert.isBelow(first.expiresAt, Duration.toMillis("1 day"))
      // the background purge of the configuration deletes a record that expired, a minute later
      const id = freshId()
      const expired = expectReserved(yield* store.reserve(reserveRequest(id, { ttl: Duration.seconds(1) })))
      yield* store.complete({
        id,
        token: expired.token,
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }),
        ttl: Duration.seconds(1)
      })
      const count = Effect.map(
        exec(`SELECT count(*)::integer AS n FROM "${CONFIG_TABLE}"`),
        (rows) => rows[0]!.n as number
      )
      assert.strictEqual(yield* count, 2)
      // the first round runs at once and is a real query
      yield* Timing.awaitSleeper("1 minute")
      yield* TestClock.adjust("1 minute")
      // the purge round runs on its own fiber: read until it has deleted (a loaded machine gets 30 s)
      yield* Timing.eventually(Effect.map(count, (n) => n <= 1), "the purge did not run", { within: "30 seconds" })
      assert.strictEqual(yield* count, 1)
    }))

  it.scoped("layerConfig fails with the ConfigError of a value that does not parse, and InvalidTableName", () =>
    Effect.gen(function*() {
      const badClock = yield* Effect.exit(
        build(configured).pipe(Effect.withConfigProvider(fromMap([
          ["IDEMPOTENCY_TABLE", CONFIG_TABLE],
          ["IDEMPOTENCY_CLOCK", "sundial"]
        ])))
      )
      assert.isTrue(Exit.isFailure(badClock) && String(badClock.cause).includes("IDEMPOTENCY_CLOCK"))
      const badTable = yield* Effect.exit(
        build(configured).pipe(Effect.withConfigProvider(fromMap([
          ["IDEMPOTENCY_TABLE", "bad name"],
          ["IDEMPOTENCY_CLOCK", "server"]
        ])))
      )
      assert.isTrue(Exit.isFailure(badTable))
      if (Exit.isFailure(badTable)) {
        const failure = badTable.cause._tag === "Fail" ? badTable.cause.error : undefined
        assert.instanceOf(failure, PgIdempotencyTable.InvalidTableName)
      }
    }))
})
