/**
 * The conformance suite every `IdempotencyStore` passes, called once from each store's tests with
 * its layer (README.md#store-conformance-suite).
 *
 * @example
 * ```ts
 * import { StoreConformance } from "@effect-idempotency/testing"
 * import { IdempotencyStore } from "@effect-idempotency/core"
 *
 * StoreConformance.suite("memory store", IdempotencyStore.layerMemoryWith({ warn: false }))
 * ```
 *
 * @since 0.1.0
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import type { YieldWrap } from "effect/Utils"
import {
  expectExisting,
  expectLeaseLost,
  expectReserved,
  FP_A,
  FP_B,
  freshId,
  reserveRequest
} from "./StoreFixtures.js"

/**
 * Options of the suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Moves the store's clock forward. Default: `TestClock.adjust`, from the wall clock. */
  readonly advance?: ((duration: Duration.Duration) => Effect.Effect<void>) | undefined
  /** Concurrent reservations of one key. Default 100. */
  readonly concurrency?: number | undefined
  /** For the layer to build. Default 60 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
}

const LEASE = Duration.seconds(30)

/** A reservation of `id` (`reserveRequest` with `overrides`) that must be Reserved. */
const mustReserve = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  id: IdempotencyRecord.RecordId,
  overrides?: Partial<IdempotencyStore.ReserveRequest>
) => Effect.map(store.reserve(reserveRequest(id, overrides)), expectReserved)

/** A reservation of `id` (`reserveRequest` with `overrides`) that must find the record there (Existing). */
const mustFind = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  id: IdempotencyRecord.RecordId,
  overrides?: Partial<IdempotencyStore.ReserveRequest>
) => Effect.map(store.reserve(reserveRequest(id, overrides)), expectExisting)

/** Purges `limit` at a time until a round deletes nothing (`rounds` at most); how many went. */
const purgeAll = (store: IdempotencyStore.IdempotencyStore["Type"], limit: number, rounds: number) =>
  Effect.gen(function*() {
    let purged = 0
    for (let round = 0; round < rounds; round++) {
      const n = yield* store.purgeExpired({ limit })
      purged += n
      if (n === 0) break
    }
    return purged
  })
const TTL = Duration.hours(1)

/**
 * One check of the suite: a name, and an effect that fails when the store breaks that rule.
 *
 * @since 0.1.0
 * @category models
 */
export interface Check {
  readonly name: string
  readonly run: Effect.Effect<void, unknown, IdempotencyStore.IdempotencyStore>
}

/**
 * The checks of the suite, to run one by one (against a broken store, say).
 *
 * @since 0.1.0
 * @category suites
 */
export const checks = (options?: Omit<Options, "timeout">): ReadonlyArray<Check> => {
  const concurrency = options?.concurrency ?? 100
  const startClock: Effect.Effect<void> = options?.advance === undefined
    ? Effect.flatMap(TestServices.provideLive(Clock.currentTimeMillis), (now) => TestClock.setTime(now))
    : Effect.void
  const advance = options?.advance ?? ((duration: Duration.Duration) => TestClock.adjust(duration))

  /** `n` concurrent reservations of `id`: exactly one is Reserved, its owner. */
  const race = (store: IdempotencyStore.IdempotencyStore["Type"], id: IdempotencyRecord.RecordId, n: number) =>
    Effect.map(
      Effect.all(Array.from({ length: n }, () => store.reserve(reserveRequest(id))), { concurrency: "unbounded" }),
      (results) => {
        const reserved = results.filter((result) => result._tag === "Reserved")
        assert.strictEqual(reserved.length, 1)
        return { results, owner: expectReserved(reserved[0]!) }
      }
    )

  const list: Array<Check> = []
  /** A check whose body, a generator as `Effect.gen` takes, runs on the store once the clock is set. */
  const check = (
    name: string,
    body: (
      store: IdempotencyStore.IdempotencyStore["Type"]
    ) => Generator<YieldWrap<Effect.Effect<unknown, unknown, IdempotencyStore.IdempotencyStore>>, void, unknown>
  ) => {
    list.push({
      name,
      run: Effect.zipRight(
        startClock,
        Effect.flatMap(IdempotencyStore.IdempotencyStore, (store) => Effect.gen(() => body(store)))
      )
    })
  }

  check(`exactly one of ${concurrency} concurrent reservations of one key is Reserved`, function*(store) {
    const id = freshId()
    const { owner: winner, results } = yield* race(store, id, concurrency)
    for (const result of results) {
      if (result._tag === "Existing") {
        assert.strictEqual(result.record.status, "IN_PROGRESS")
        assert.strictEqual(result.record.token, winner.token)
      }
    }
  })

  check("a first reservation holds the record IN_PROGRESS with its token, fingerprint and lease", function*(store) {
    const id = freshId()
    const request = reserveRequest(id)
    const reserved = expectReserved(yield* store.reserve(request))
    assert.strictEqual(reserved.token, request.token)
    assert.strictEqual(reserved.attempt, 1)
    assert.isTrue(reserved.expiresAt >= reserved.leaseUntil)
    const record = Option.getOrThrow(yield* store.get(id))
    assert.strictEqual(record.status, "IN_PROGRESS")
    assert.strictEqual(record.token, request.token)
    assert.strictEqual(record.fingerprint, FP_A)
    assert.strictEqual(record.attempt, 1)
    assert.strictEqual(record.leaseUntil, reserved.leaseUntil)
    const again = yield* mustFind(store, id, { fingerprint: FP_B })
    assert.strictEqual(again.record.fingerprint, FP_A)
    assert.isTrue(again.record.leaseUntil > again.now)
  })

  check("a completed record is returned with its outcome to every later reservation", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify({ orderId: 42 }) })
    yield* store.complete({ id, token: first.token, outcome, ttl: TTL })
    for (let i = 0; i < 3; i++) {
      const existing = yield* mustFind(store, id)
      assert.strictEqual(existing.record.status, "COMPLETED")
      assert.deepStrictEqual(existing.record.outcome, outcome)
      assert.strictEqual(existing.record.token, first.token)
    }
    yield* advance(Duration.minutes(59))
    const later = yield* mustFind(store, id, { takeover: true })
    assert.strictEqual(later.record.status, "COMPLETED")
  })

  check("stored failure, unknown (timeout) and omitted outcomes round-trip", function*(store) {
    const outcomes = [
      IdempotencyRecord.StoredOutcome.Failure({ error: JSON.stringify({ _tag: "OutOfStock", sku: "A-1" }) }),
      IdempotencyRecord.StoredOutcome.Timeout(),
      IdempotencyRecord.StoredOutcome.Omitted({ reason: "outcome of 512000 bytes exceeds the item limit" })
    ]
    for (const outcome of outcomes) {
      const id = freshId()
      const first = yield* mustReserve(store, id)
      yield* store.complete({ id, token: first.token, outcome, ttl: TTL })
      const record = Option.getOrThrow(yield* store.get(id))
      assert.strictEqual(record.status, "COMPLETED")
      assert.deepStrictEqual(record.outcome, outcome)
    }
  })

  check("a stale token gets LeaseLost on complete, release, markFailed and extend", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* advance(Duration.sum(LEASE, Duration.seconds(1)))
    const second = yield* mustReserve(store, id)
    assert.notStrictEqual(second.token, first.token)
    const stale = { id, token: first.token }
    yield* expectLeaseLost(
      store.complete({ ...stale, outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }), ttl: TTL })
    )
    yield* expectLeaseLost(store.release(stale))
    yield* expectLeaseLost(store.markFailed({ ...stale, ttl: TTL }))
    yield* expectLeaseLost(store.extend({ ...stale, lease: LEASE }))
    const record = Option.getOrThrow(yield* store.get(id))
    assert.strictEqual(record.status, "IN_PROGRESS")
    assert.strictEqual(record.token, second.token)
    assert.strictEqual(record.attempt, 2)
    // a token that never held the record is refused too
    yield* expectLeaseLost(store.release({ id, token: crypto.randomUUID() }))
  })

  check("writes on a completed or absent record get LeaseLost", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"done\"" })
    yield* store.complete({ id, token: first.token, outcome, ttl: TTL })
    yield* expectLeaseLost(store.complete({ id, token: first.token, outcome, ttl: TTL }))
    yield* expectLeaseLost(store.release({ id, token: first.token }))
    yield* expectLeaseLost(store.extend({ id, token: first.token, lease: LEASE }))
    const absent = freshId()
    yield* expectLeaseLost(store.complete({ id: absent, token: first.token, outcome, ttl: TTL }))
    yield* expectLeaseLost(store.markFailed({ id: absent, token: first.token, ttl: TTL }))
  })

  check("the owner of an expired record gets LeaseLost on every write", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id, { lease: Duration.seconds(5), ttl: Duration.seconds(10) })
    yield* advance(Duration.seconds(11))
    const owner = { id, token: first.token }
    yield* expectLeaseLost(
      store.complete({ ...owner, outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }), ttl: TTL })
    )
    yield* expectLeaseLost(store.extend({ ...owner, lease: LEASE }))
    yield* expectLeaseLost(store.markFailed({ ...owner, ttl: TTL }))
    yield* expectLeaseLost(store.release(owner))
    assert.isTrue(Option.isNone(yield* store.get(id)))
  })

  check("an expired FAILED or completed record starts again at attempt 1, whatever its fingerprint", function*(store) {
    const failed = freshId()
    const first = yield* mustReserve(store, failed)
    yield* store.markFailed({ id: failed, token: first.token, ttl: Duration.seconds(10) })
    const completed = freshId()
    const second = yield* mustReserve(store, completed)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "2" })
    yield* store.complete({ id: completed, token: second.token, outcome, ttl: Duration.seconds(10) })
    yield* advance(Duration.seconds(11))
    assert.strictEqual((yield* mustReserve(store, failed)).attempt, 1)
    const other = yield* mustReserve(store, completed, { fingerprint: FP_B })
    assert.strictEqual(other.attempt, 1)
    const record = Option.getOrThrow(yield* store.get(completed))
    assert.deepStrictEqual([record.status, record.fingerprint, record.outcome], ["IN_PROGRESS", FP_B, undefined])
  })

  check("an expired lease is taken over with a new token and the next attempt number", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* advance(Duration.seconds(29))
    const blocked = yield* mustFind(store, id)
    assert.strictEqual(blocked.record.token, first.token)
    assert.isTrue(blocked.record.leaseUntil > blocked.now)
    yield* advance(Duration.seconds(2))
    const { owner } = yield* race(store, id, Math.min(concurrency, 50))
    assert.strictEqual(owner.attempt, 2)
    assert.notStrictEqual(owner.token, first.token)
    const record = Option.getOrThrow(yield* store.get(id))
    assert.strictEqual(record.token, owner.token)
  })

  check("an expired lease is not taken over when takeover is off, nor by another fingerprint", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* advance(Duration.sum(LEASE, Duration.seconds(1)))
    const refused = yield* mustFind(store, id, { takeover: false })
    assert.strictEqual(refused.record.token, first.token)
    assert.isTrue(refused.record.leaseUntil <= refused.now)
    const other = yield* mustFind(store, id, { fingerprint: FP_B })
    assert.strictEqual(other.record.fingerprint, FP_A)
  })

  check("extend moves the lease forward; the old owner keeps the record", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* advance(Duration.seconds(25))
    yield* store.extend({ id, token: first.token, lease: LEASE })
    yield* advance(Duration.seconds(25))
    const blocked = yield* mustFind(store, id)
    assert.strictEqual(blocked.record.token, first.token)
    yield* advance(Duration.seconds(6))
    const taken = yield* mustReserve(store, id)
    assert.strictEqual(taken.attempt, 2)
  })

  check("release makes the key reservable again", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* store.release({ id, token: first.token })
    assert.isTrue(Option.isNone(yield* store.get(id)))
    const again = yield* mustReserve(store, id, { fingerprint: FP_B })
    assert.strictEqual(again.attempt, 1)
  })

  check("a FAILED record is taken over by the same fingerprint only", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    yield* store.markFailed({ id, token: first.token, ttl: TTL })
    const record = Option.getOrThrow(yield* store.get(id))
    assert.strictEqual(record.status, "FAILED")
    const other = yield* mustFind(store, id, { fingerprint: FP_B })
    assert.strictEqual(other.record.status, "FAILED")
    const retry = yield* mustReserve(store, id, { takeover: false })
    assert.strictEqual(retry.attempt, 2)
  })

  check("a record is absent once its TTL passed, and purge deletes it", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "true" })
    yield* store.complete({ id, token: first.token, outcome, ttl: Duration.seconds(10) })
    yield* advance(Duration.seconds(9))
    assert.isTrue(Option.isSome(yield* store.get(id)))
    yield* advance(Duration.seconds(2))
    assert.isTrue(Option.isNone(yield* store.get(id)))
    assert.isAtLeast(yield* purgeAll(store, 100, 1000), 1)
    assert.strictEqual(yield* store.purgeExpired({ limit: 100 }), 0)
    const fresh = yield* mustReserve(store, id, { fingerprint: FP_B })
    assert.strictEqual(fresh.attempt, 1)
  })

  check("an IN_PROGRESS record expires too (its lease never outlives its TTL)", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id, { lease: Duration.seconds(30), ttl: Duration.seconds(5) })
    assert.isTrue(first.expiresAt >= first.leaseUntil)
    yield* advance(Duration.seconds(10))
    const blocked = yield* mustFind(store, id, { fingerprint: FP_B })
    assert.strictEqual(blocked.record.status, "IN_PROGRESS")
    yield* advance(Duration.seconds(21))
    assert.isTrue(Option.isNone(yield* store.get(id)))
    const fresh = yield* mustReserve(store, id, { fingerprint: FP_B })
    assert.strictEqual(fresh.attempt, 1)
  })

  check("purge deletes expired records only, and at most `limit` per call", function*(store) {
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
    const expired = Array.from({ length: 3 }, () => freshId())
    for (const id of expired) {
      const reserved = yield* mustReserve(store, id)
      yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.seconds(10) })
    }
    const completed = freshId()
    const done = yield* mustReserve(store, completed)
    yield* store.complete({ id: completed, token: done.token, outcome, ttl: TTL })
    const inProgress = freshId()
    const running = yield* mustReserve(store, inProgress)
    const failed = freshId()
    const marked = yield* mustReserve(store, failed)
    yield* store.markFailed({ id: failed, token: marked.token, ttl: TTL })
    yield* advance(Duration.seconds(11))
    // at least three records are expired: a purge limited to one deletes exactly one
    assert.strictEqual(yield* store.purgeExpired({ limit: 1 }), 1)
    for (let round = 0; round < 1000; round++) {
      const n = yield* store.purgeExpired({ limit: 2 })
      assert.isAtMost(n, 2)
      if (n === 0) break
    }
    const kept = Option.getOrThrow(yield* store.get(completed))
    assert.deepStrictEqual([kept.status, kept.token, kept.outcome], ["COMPLETED", done.token, outcome])
    const held = Option.getOrThrow(yield* store.get(inProgress))
    assert.deepStrictEqual([held.status, held.token], ["IN_PROGRESS", running.token])
    assert.strictEqual(Option.getOrThrow(yield* store.get(failed)).status, "FAILED")
    for (const id of expired) assert.isTrue(Option.isNone(yield* store.get(id)))
  })

  check("the TTL of an outcome counts from its completion, not from the reservation", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id, { lease: Duration.seconds(60) })
    yield* advance(Duration.seconds(20))
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"late\"" })
    yield* store.complete({ id, token: first.token, outcome, ttl: Duration.seconds(10) })
    yield* advance(Duration.seconds(9))
    assert.strictEqual(Option.getOrThrow(yield* store.get(id)).status, "COMPLETED")
    yield* advance(Duration.seconds(2))
    assert.isTrue(Option.isNone(yield* store.get(id)))
  })

  check("extend keeps a record past a TTL shorter than the new lease", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id, { lease: Duration.seconds(5), ttl: Duration.seconds(5) })
    yield* advance(Duration.seconds(4))
    yield* store.extend({ id, token: first.token, lease: Duration.seconds(30) })
    yield* advance(Duration.seconds(20))
    const record = Option.getOrThrow(yield* store.get(id))
    assert.deepStrictEqual([record.status, record.token], ["IN_PROGRESS", first.token])
    assert.isAtLeast(record.expiresAt, record.leaseUntil)
    const blocked = yield* mustFind(store, id)
    assert.strictEqual(blocked.record.token, first.token)
  })

  check("markFailed on a COMPLETED record gets LeaseLost and leaves the outcome", function*(store) {
    const id = freshId()
    const first = yield* mustReserve(store, id)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"kept\"" })
    yield* store.complete({ id, token: first.token, outcome, ttl: TTL })
    yield* expectLeaseLost(store.markFailed({ id, token: first.token, ttl: TTL }))
    const record = Option.getOrThrow(yield* store.get(id))
    assert.deepStrictEqual([record.status, record.outcome], ["COMPLETED", outcome])
  })

  check(
    "a takeover of a FAILED record, and of an expired one, is won by exactly one of concurrent attempts",
    function*(store) {
      const racers = Math.min(concurrency, 50)
      const failed = freshId()
      const first = yield* mustReserve(store, failed)
      yield* store.markFailed({ id: failed, token: first.token, ttl: TTL })
      const expired = freshId()
      const second = yield* mustReserve(store, expired, { lease: Duration.seconds(5), ttl: Duration.seconds(5) })
      yield* advance(Duration.seconds(6))
      for (const [id, previous] of [[failed, first], [expired, second]] as const) {
        const { owner, results } = yield* race(store, id, racers)
        assert.notStrictEqual(owner.token, previous.token)
        assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, owner.token)
        for (const result of results) {
          if (result._tag === "Existing") assert.strictEqual(result.record.token, owner.token)
        }
      }
    }
  )

  check("the same key under two scopes or two operations never touches the same record", function*(store) {
    const key = IdempotencyKey.unsafeMake(crypto.randomUUID())
    const operation = `conformance-${crypto.randomUUID()}`
    const ids = [
      IdempotencyRecord.makeRecordId({ operation, key }),
      IdempotencyRecord.makeRecordId({ operation, key, scope: "tenant-a" }),
      IdempotencyRecord.makeRecordId({ operation, key, scope: "tenant-b" }),
      IdempotencyRecord.makeRecordId({ operation, key, scope: "" }),
      IdempotencyRecord.makeRecordId({ operation: `${operation}-other`, key }),
      IdempotencyRecord.makeRecordId({ operation: `${operation}-other`, key, scope: "tenant-a" }),
      // separators inside names cannot forge another record's id
      IdempotencyRecord.makeRecordId({ operation: `${operation}#tenant-a`, key })
    ]
    assert.strictEqual(new Set(ids.map((id) => id.value)).size, ids.length)
    const first = yield* Effect.forEach(ids, (id) => store.reserve(reserveRequest(id)))
    first.forEach(expectReserved)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"a\"" })
    yield* store.complete({ id: ids[1]!, token: expectReserved(first[1]!).token, outcome, ttl: TTL })
    for (const [index, id] of ids.entries()) {
      const record = Option.getOrThrow(yield* store.get(id))
      assert.strictEqual(record.status, index === 1 ? "COMPLETED" : "IN_PROGRESS")
    }
  })

  check("outcomes of 256 KiB and unicode text round-trip exactly", function*(store) {
    const unicode = "naïve café — 日本語 — emoji 🧾💳 — Ελληνικά — עברית — \u{1F600} — combining e\u0301"
    const big = JSON.stringify({ note: unicode, blob: "x".repeat(256 * 1024) })
    const texts = [JSON.stringify(unicode), big, JSON.stringify("line\nbreak\ttab \\ \" quote \u0001")]
    for (const text of texts) {
      const id = freshId({ scope: "tenant-ü" })
      const first = yield* mustReserve(store, id)
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: text })
      yield* store.complete({ id, token: first.token, outcome, ttl: TTL })
      const existing = yield* mustFind(store, id)
      const stored = existing.record.outcome
      assert.strictEqual(stored?._tag, "Success")
      assert.strictEqual(stored?._tag === "Success" ? stored.value : undefined, text)
    }
  })

  const Payload = Schema.Struct({ amount: Schema.Number, currency: Schema.String })
  const Charge = Schema.Struct({ chargeId: Schema.String, at: Schema.DateFromString })

  check("through Idempotency: one execution, replays decode the outcome, a changed request is KeyReused", function*() {
    const executions = yield* Ref.make(0)
    const charge = Idempotency.make({
      name: `conformance-charge-${crypto.randomUUID()}`,
      payload: Payload,
      success: Charge,
      execute: (payload) =>
        Ref.updateAndGet(executions, (n) => n + 1).pipe(
          Effect.map((n) => ({ chargeId: `ch_${n}_${payload.amount}`, at: new Date(1_700_000_000_000) }))
        )
    })
    const key = crypto.randomUUID()
    const first = yield* charge.runDetailed({ key, payload: { amount: 10, currency: "EUR" } })
    const second = yield* charge.runDetailed({ key: `"${key}"`, payload: { currency: "EUR", amount: 10 } })
    assert.isFalse(first.replayed)
    assert.isTrue(second.replayed)
    assert.strictEqual(second.value.chargeId, first.value.chargeId)
    assert.instanceOf(second.value.at, Date)
    assert.strictEqual(second.value.at.getTime(), first.value.at.getTime())
    const reused = yield* Effect.either(charge.run({ key, payload: { amount: 11, currency: "EUR" } }))
    assert.isTrue(Either.isLeft(reused) && reused.left._tag === "KeyReused")
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

  check(`through Idempotency: ${concurrency} concurrent attempts run the downstream once`, function*() {
    const executions = yield* Ref.make(0)
    const op = Idempotency.make({
      name: `conformance-race-${crypto.randomUUID()}`,
      payload: Payload,
      success: Schema.Number,
      execute: () => Ref.updateAndGet(executions, (n) => n + 1)
    })
    const key = crypto.randomUUID()
    const results = yield* Effect.all(
      Array.from(
        { length: concurrency },
        () => Effect.either(op.run({ key, payload: { amount: 1, currency: "EUR" } }))
      ),
      { concurrency: "unbounded" }
    )
    assert.strictEqual(yield* Ref.get(executions), 1)
    for (const result of results) {
      if (Either.isRight(result)) {
        assert.strictEqual(result.right, 1)
      } else assert.strictEqual(result.left._tag, "IdempotencyConflict")
    }
    const replay = yield* op.runDetailed({ key, payload: { amount: 1, currency: "EUR" } })
    assert.isTrue(replay.replayed)
    assert.strictEqual(replay.value, 1)
  })

  return list
}

/**
 * Registers the conformance tests for a store layer.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <E>(
  name: string,
  storeLayer: Layer.Layer<IdempotencyStore.IdempotencyStore, E>,
  options?: Options
) =>
  layer(storeLayer, { timeout: options?.timeout ?? Duration.seconds(60) })(name, (it) => {
    for (const { name, run } of checks(options)) it.effect(name, () => run)
  })

/**
 * Options of the server-clock suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerClockOptions<R> {
  /** The server's clock, in epoch milliseconds. */
  readonly now: Effect.Effect<number, unknown, R>
  /** The server deletes expired records by itself, so a purge finds none. Default false. */
  readonly nativeExpiry?: boolean | undefined
  /** For the layer to build. Default 60 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
}

/**
 * Registers the tests of a store that reads its server's clock: leases and expiry follow `now`,
 * while `TestClock` stays at 1970, and nothing sleeps.
 *
 * @example
 * ```ts
 * import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
 * import { StoreConformance } from "@effect-idempotency/testing"
 * import * as PgClient from "@effect/sql-pg/PgClient"
 * import * as SqlClient from "@effect/sql/SqlClient"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import * as Redacted from "effect/Redacted"
 *
 * // the database's clock in epoch milliseconds, as the store reads it
 * const now = Effect.flatMap(SqlClient.SqlClient, (sql) =>
 *   sql<{ readonly ms: string }>`SELECT floor(extract(epoch FROM statement_timestamp()) * 1000) AS ms`.pipe(
 *     Effect.map((rows) => Number(rows[0]!.ms))
 *   ))
 *
 * StoreConformance.serverClockSuite(
 *   "PgIdempotencyStore with the database's clock",
 *   PgIdempotencyStore.layer.pipe(
 *     Layer.provideMerge(PgClient.layer({ url: Redacted.make("postgres://postgres@127.0.0.1:5432/test") }))
 *   ),
 *   { now }
 * )
 * ```
 *
 * @since 0.1.0
 * @category suites
 */
export const serverClockSuite = <R, E>(
  name: string,
  storeLayer: Layer.Layer<IdempotencyStore.IdempotencyStore | R, E>,
  options: ServerClockOptions<NoInfer<R>>
) =>
  layer(storeLayer, { timeout: options.timeout ?? Duration.seconds(60) })(name, (it) => {
    const HOUR = Duration.hours(1)
    const HOUR_MS = Duration.toMillis(HOUR)
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"ok\"" })

    it.effect("leases and expiry are read from the server's clock, not the fiber's", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const before = yield* options.now
        const reserved = yield* mustReserve(store, id, { lease: Duration.seconds(30), ttl: HOUR })
        const after = yield* options.now
        assert.isTrue(reserved.leaseUntil >= before + 30_000 && reserved.leaseUntil <= after + 30_000)
        assert.strictEqual(reserved.expiresAt, reserved.leaseUntil - 30_000 + HOUR_MS)
        // the fiber's clock jumps two hours (and was at 1970 before): nothing changes in the store
        yield* TestClock.adjust(Duration.hours(2))
        const blocked = yield* mustFind(store, id)
        assert.strictEqual(blocked.record.token, reserved.token)
        assert.isTrue(blocked.now >= before && blocked.now <= (yield* options.now))
        assert.isTrue(Option.isSome(yield* store.get(id)))
      }))

    it.effect("a lease of 0 is over at once: the next reservation takes the record over", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* mustReserve(store, id, { lease: Duration.zero })
        assert.isTrue(first.expiresAt > first.leaseUntil)
        const second = yield* mustReserve(store, id)
        assert.strictEqual(second.attempt, 2)
        assert.notStrictEqual(second.token, first.token)
        // the first owner is fenced out
        yield* expectLeaseLost(store.complete({ id, token: first.token, outcome, ttl: HOUR }))
      }))

    it.effect("a lease of an hour blocks other attempts; an ended lease is kept when takeover is off", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const live = freshId()
        const holder = yield* mustReserve(store, live, { lease: HOUR })
        const blocked = yield* mustFind(store, live)
        assert.strictEqual(blocked.record.token, holder.token)
        assert.strictEqual(blocked.record.status, "IN_PROGRESS")
        assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)

        const ended = freshId()
        const crashed = yield* mustReserve(store, ended, { lease: Duration.zero })
        const kept = yield* mustFind(store, ended, { takeover: false })
        assert.strictEqual(kept.record.token, crashed.token)
        assert.isTrue(kept.record.leaseUntil <= kept.now)
        const other = yield* mustFind(store, ended, { fingerprint: FP_B })
        assert.strictEqual(other.record.token, crashed.token)
      }))

    it.effect("a record lives now + max(lease, ttl) from its reservation", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const longLease = yield* mustReserve(store, freshId(), { lease: Duration.hours(2), ttl: HOUR })
        assert.strictEqual(longLease.expiresAt, longLease.leaseUntil)
        const longTtl = yield* mustReserve(store, freshId(), { lease: Duration.seconds(5), ttl: Duration.hours(3) })
        assert.strictEqual(longTtl.expiresAt - longTtl.leaseUntil, 3 * HOUR_MS - 5_000)
      }))

    it.effect("an infinite lease and TTL are kept as the far future", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const reserved = yield* mustReserve(store, id, { lease: Duration.infinity, ttl: Duration.infinity })
        assert.isTrue(Number.isSafeInteger(reserved.expiresAt) && reserved.expiresAt > 2 ** 52)
        yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.infinity })
        const replay = yield* mustFind(store, id)
        assert.strictEqual(replay.record.status, "COMPLETED")
        assert.deepStrictEqual(replay.record.outcome, outcome)
      }))

    it.effect("a completion with a TTL of an hour is replayed; with a TTL of 0 it is gone at once", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const kept = freshId()
        const first = yield* mustReserve(store, kept)
        yield* store.complete({ id: kept, token: first.token, outcome, ttl: HOUR })
        const replay = yield* mustFind(store, kept)
        assert.strictEqual(replay.record.status, "COMPLETED")
        assert.deepStrictEqual(replay.record.outcome, outcome)
        assert.isTrue(replay.record.expiresAt - replay.now > HOUR_MS - 60_000)

        const gone = freshId()
        const owner = yield* mustReserve(store, gone)
        yield* store.complete({ id: gone, token: owner.token, outcome, ttl: Duration.zero })
        assert.isTrue(Option.isNone(yield* store.get(gone)))
        yield* expectLeaseLost(store.extend({ id: gone, token: owner.token, lease: HOUR }))
        if (options.nativeExpiry === true) {
          assert.strictEqual(yield* store.purgeExpired({ limit: 50 }), 0)
        } else {
          assert.isAtLeast(yield* purgeAll(store, 50, 100), 1)
        }
        const fresh = yield* mustReserve(store, gone, { fingerprint: FP_B })
        assert.strictEqual(fresh.attempt, 1)
      }))

    it.effect("an expired record is overwritten by the next reservation before any purge", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* mustReserve(store, id)
        yield* store.markFailed({ id, token: first.token, ttl: Duration.zero })
        const fresh = yield* mustReserve(store, id, { fingerprint: FP_B })
        assert.strictEqual(fresh.attempt, 1)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.fingerprint, FP_B)
        assert.strictEqual(record.status, "IN_PROGRESS")
      }))

    it.effect("extend moves an ended lease an hour ahead: the record is blocked again", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* mustReserve(store, id, { lease: Duration.zero, ttl: Duration.minutes(1) })
        yield* store.extend({ id, token: first.token, lease: HOUR })
        const blocked = yield* mustFind(store, id)
        assert.strictEqual(blocked.record.token, first.token)
        assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)
        // the record lives at least as long as its lease: past its one-minute TTL
        assert.strictEqual(blocked.record.expiresAt, blocked.record.leaseUntil)
        assert.isTrue(blocked.record.expiresAt > first.expiresAt)
      }))

    it.effect("a FAILED record is taken over at once by the same request, never by another", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* mustReserve(store, id, { lease: HOUR })
        yield* store.markFailed({ id, token: first.token, ttl: HOUR })
        const other = yield* mustFind(store, id, { fingerprint: FP_B })
        assert.strictEqual(other.record.status, "FAILED")
        const retry = yield* mustReserve(store, id, { takeover: false })
        assert.strictEqual(retry.attempt, 2)
      }))
  })
