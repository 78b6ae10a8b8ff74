/**
 * The default clock: lease and TTL expiry follow the database's `statement_timestamp()`, whatever
 * the fiber's `Clock` says. The testing kit's server-clock suite holds the checks every such store
 * passes; here, what is PostgreSQL's own: expired records stay in the table until a purge, which
 * `layerWith({ purgeInterval })` runs in the background.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { StoreConformance, Timing } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { DB_NOW, expectReserved, freshId, reserveRequest } from "./utils/fixtures.js"
import { layerClient, layerPrimary, resetTable, runTable } from "./utils/TestDatabase.js"

// a table in a schema of its own
const TABLE = { schema: runTable("idem_clock"), table: "records" }

const StoreLive = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  Effect.zipRight(resetTable(TABLE), PgIdempotencyStore.make(TABLE))
).pipe(
  Layer.provideMerge(layerClient()),
  Layer.provide(layerPrimary)
)

const databaseNow = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) =>
    sql.unsafe<{ readonly now: string }>(`SELECT ${DB_NOW} AS now`).withoutTransform.pipe(
      Effect.map((rows) => Number(rows[0]!.now))
    )
)

StoreConformance.serverClockSuite("PgIdempotencyStore with the database's clock", StoreLive, {
  now: databaseNow,
  timeout: "2 minutes"
})

// `it.effect` runs on a TestClock that stays at 0 unless adjusted: the store must not read it
layer(StoreLive, { timeout: "2 minutes" })("PgIdempotencyStore with the database's clock, purged", (it) => {
  it.scoped("layerWith({ purgeInterval }) deletes expired records in the background", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* IdempotencyStore.IdempotencyStore
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"ok\"" })
      const expired = Effect.gen(function*() {
        const id = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(id)))
        yield* store.complete({ id, token: first.token, outcome, ttl: Duration.zero })
        return id
      })
      const stored = (id: IdempotencyRecord.RecordId) =>
        sql.unsafe<{ readonly n: number }>(
          `SELECT count(*)::integer AS n FROM "${TABLE.schema}"."${TABLE.table}" WHERE id = $1`,
          [id.value]
        ).withoutTransform.pipe(Effect.map((rows) => rows[0]!.n))
      // the purge runs on its own fiber: read until it has deleted (a loaded machine gets 30 s)
      const awaitPurged = (id: IdempotencyRecord.RecordId) =>
        Timing.eventually(Effect.map(stored(id), (n) => n === 0), "the purge did not delete", { within: "30 seconds" })

      const before = yield* expired
      yield* Layer.build(PgIdempotencyStore.layerWith({ ...TABLE, purgeInterval: "1 minute", purgeLimit: 100 }))
      // the first purge runs when the layer starts
      yield* awaitPurged(before)
      // the next one after the interval, on the fiber's clock
      const after = yield* expired
      assert.strictEqual(yield* stored(after), 1)
      yield* Timing.awaitSleeper("1 minute")
      yield* TestClock.adjust(Duration.minutes(1))
      yield* awaitPurged(after)
    }))
})
