/**
 * The default clock: lease and TTL expiry follow the database's `statement_timestamp()`, whatever
 * the fiber's `Clock` says. Deterministic without sleeping: a lease or TTL of 0 is over by the next
 * statement; one of an hour is not over during the test.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import {
  awaitSleeper,
  DB_NOW,
  expectExisting,
  expectReserved,
  FP_B,
  freshId,
  reserveRequest
} from "./utils/fixtures.js"
import { layerClient, layerPrimary, resetTable, runTable } from "./utils/TestDatabase.js"

// a table in a schema of its own
const TABLE = { schema: runTable("idem_clock"), table: "records" }
const HOUR = Duration.hours(1)
const HOUR_MS = 3_600_000

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

const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"ok\"" })

// `it.effect` runs on a TestClock that stays at 0 unless adjusted: the store must not read it
layer(StoreLive, { timeout: "2 minutes" })("PgIdempotencyStore with the database's clock", (it) => {
  it.effect("leases and expiry are read from the database's clock, not the fiber's", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const before = yield* databaseNow
      const reserved = expectReserved(
        yield* store.reserve(reserveRequest(id, { lease: Duration.seconds(30), ttl: HOUR }))
      )
      const after = yield* databaseNow
      assert.isTrue(reserved.leaseUntil >= before + 30_000 && reserved.leaseUntil <= after + 30_000)
      assert.strictEqual(reserved.expiresAt, reserved.leaseUntil - 30_000 + HOUR_MS)
      // the fiber's clock jumps two hours (and was at 1970 before): nothing changes in the store
      yield* TestClock.adjust(Duration.hours(2))
      const blocked = expectExisting(yield* store.reserve(reserveRequest(id)))
      assert.strictEqual(blocked.record.token, reserved.token)
      assert.isTrue(blocked.now >= before && blocked.now <= (yield* databaseNow))
      assert.isTrue(Option.isSome(yield* store.get(id)))
    }))

  it.effect("a lease of 0 is over at once: the next reservation takes the record over", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const first = expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
      assert.isTrue(first.expiresAt > first.leaseUntil)
      const second = expectReserved(yield* store.reserve(reserveRequest(id)))
      assert.strictEqual(second.attempt, 2)
      assert.notStrictEqual(second.token, first.token)
      // the first owner is fenced out
      const lost = yield* Effect.flip(store.complete({ id, token: first.token, outcome, ttl: HOUR }))
      assert.strictEqual(lost._tag, "LeaseLost")
    }))

  it.effect("a lease of an hour blocks other attempts; an ended lease is kept when takeover is off", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const live = freshId()
      const holder = expectReserved(yield* store.reserve(reserveRequest(live, { lease: HOUR })))
      const blocked = expectExisting(yield* store.reserve(reserveRequest(live)))
      assert.strictEqual(blocked.record.token, holder.token)
      assert.strictEqual(blocked.record.status, "IN_PROGRESS")
      assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)

      const ended = freshId()
      const crashed = expectReserved(yield* store.reserve(reserveRequest(ended, { lease: Duration.zero })))
      const kept = expectExisting(yield* store.reserve(reserveRequest(ended, { takeover: false })))
      assert.strictEqual(kept.record.token, crashed.token)
      assert.isTrue(kept.record.leaseUntil <= kept.now)
      // nor by another request
      const other = expectExisting(yield* store.reserve(reserveRequest(ended, { fingerprint: FP_B })))
      assert.strictEqual(other.record.token, crashed.token)
    }))

  it.effect("a record lives now + max(lease, ttl) from its reservation", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const longLease = expectReserved(
        yield* store.reserve(reserveRequest(freshId(), { lease: Duration.hours(2), ttl: HOUR }))
      )
      assert.strictEqual(longLease.expiresAt, longLease.leaseUntil)
      const longTtl = expectReserved(
        yield* store.reserve(reserveRequest(freshId(), { lease: Duration.seconds(5), ttl: Duration.hours(3) }))
      )
      assert.strictEqual(longTtl.expiresAt - longTtl.leaseUntil, 3 * HOUR_MS - 5_000)
    }))

  it.effect("an infinite lease and TTL are kept as the far future", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const reserved = expectReserved(
        yield* store.reserve(reserveRequest(id, { lease: Duration.infinity, ttl: Duration.infinity }))
      )
      assert.isTrue(Number.isSafeInteger(reserved.expiresAt) && reserved.expiresAt > 2 ** 52)
      yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.infinity })
      const replay = expectExisting(yield* store.reserve(reserveRequest(id)))
      assert.strictEqual(replay.record.status, "COMPLETED")
    }))

  it.effect("a completion with a TTL of an hour is replayed; with a TTL of 0 it is gone at once", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const kept = freshId()
      const first = expectReserved(yield* store.reserve(reserveRequest(kept)))
      yield* store.complete({ id: kept, token: first.token, outcome, ttl: HOUR })
      const replay = expectExisting(yield* store.reserve(reserveRequest(kept)))
      assert.strictEqual(replay.record.status, "COMPLETED")
      assert.deepStrictEqual(replay.record.outcome, outcome)
      assert.isTrue(replay.record.expiresAt - replay.now > HOUR_MS - 60_000)

      const gone = freshId()
      const owner = expectReserved(yield* store.reserve(reserveRequest(gone)))
      yield* store.complete({ id: gone, token: owner.token, outcome, ttl: Duration.zero })
      assert.isTrue(Option.isNone(yield* store.get(gone)))
      // a write on the expired record is refused: it no longer exists
      const lost = yield* Effect.flip(store.extend({ id: gone, token: owner.token, lease: HOUR }))
      assert.strictEqual(lost._tag, "LeaseLost")
      let purged = 0
      for (let round = 0; round < 100; round++) {
        const n = yield* store.purgeExpired({ limit: 50 })
        purged += n
        if (n === 0) break
      }
      assert.isAtLeast(purged, 1)
      const fresh = expectReserved(yield* store.reserve(reserveRequest(gone, { fingerprint: FP_B })))
      assert.strictEqual(fresh.attempt, 1)
    }))

  it.effect("an expired record is overwritten by the next reservation before any purge", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const first = expectReserved(yield* store.reserve(reserveRequest(id)))
      yield* store.markFailed({ id, token: first.token, ttl: Duration.zero })
      const fresh = expectReserved(yield* store.reserve(reserveRequest(id, { fingerprint: FP_B })))
      assert.strictEqual(fresh.attempt, 1)
      const record = Option.getOrThrow(yield* store.get(id))
      assert.strictEqual(record.fingerprint, FP_B)
      assert.strictEqual(record.status, "IN_PROGRESS")
    }))

  it.effect("extend moves an ended lease an hour ahead: the record is blocked again", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const first = expectReserved(
        yield* store.reserve(reserveRequest(id, { lease: Duration.zero, ttl: Duration.minutes(1) }))
      )
      yield* store.extend({ id, token: first.token, lease: HOUR })
      const blocked = expectExisting(yield* store.reserve(reserveRequest(id)))
      assert.strictEqual(blocked.record.token, first.token)
      assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)
      // the record lives at least as long as its lease: past its one-minute TTL
      assert.strictEqual(blocked.record.expiresAt, blocked.record.leaseUntil)
      assert.isTrue(blocked.record.expiresAt > first.expiresAt)
    }))

  it.scoped("layerWith({ purgeInterval }) deletes expired records in the background", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* IdempotencyStore.IdempotencyStore
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
      const awaitPurged = (id: IdempotencyRecord.RecordId) =>
        Effect.gen(function*() {
          // the purge runs on its own fiber: read until it has deleted, 10 ms of real time apart (30 s at most)
          let remaining = yield* stored(id)
          for (let i = 0; i < 3000 && remaining > 0; i++) {
            yield* TestServices.provideLive(Effect.sleep("10 millis"))
            remaining = yield* stored(id)
          }
          assert.strictEqual(remaining, 0)
        })

      const before = yield* expired
      yield* Layer.build(PgIdempotencyStore.layerWith({ ...TABLE, purgeInterval: "1 minute", purgeLimit: 100 }))
      // the first purge runs when the layer starts
      yield* awaitPurged(before)
      // the next one after the interval, on the fiber's clock
      const after = yield* expired
      assert.strictEqual(yield* stored(after), 1)
      yield* awaitSleeper("1 minute")
      yield* TestClock.adjust(Duration.minutes(1))
      yield* awaitPurged(after)
    }))

  it.effect("a FAILED record is taken over at once by the same request, never by another", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const first = expectReserved(yield* store.reserve(reserveRequest(id, { lease: HOUR })))
      yield* store.markFailed({ id, token: first.token, ttl: HOUR })
      const other = expectExisting(yield* store.reserve(reserveRequest(id, { fingerprint: FP_B })))
      assert.strictEqual(other.record.status, "FAILED")
      const retry = expectReserved(yield* store.reserve(reserveRequest(id, { takeover: false })))
      assert.strictEqual(retry.attempt, 2)
    }))
})
