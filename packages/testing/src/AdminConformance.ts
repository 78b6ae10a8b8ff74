/**
 * The suite every store's admin primitives pass, on a real server; time is not moved, so it holds
 * for a store on its server's clock as well as on the fiber's.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { AdminConformance } from "@effect-idempotency/testing"
 *
 * AdminConformance.suite("memory store admin", IdempotencyStore.layerMemoryWith({ warn: false }))
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyAdmin, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { expectLeaseLost, expectReserved, freshId, reserveRequest } from "./StoreFixtures.js"

/**
 * Options of the suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** For the layer to build. Default 60 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
}

type Services = IdempotencyStore.IdempotencyStore | IdempotencyAdmin.IdempotencyAdmin

/**
 * One check of the suite.
 *
 * @since 0.1.0
 * @category models
 */
export interface Check {
  readonly name: string
  readonly run: Effect.Effect<void, unknown, Services>
}

const operationName = () => `admin-test-${crypto.randomUUID()}`

const reserved = (operation: string, lease: Duration.Duration) =>
  Effect.gen(function*() {
    const store = yield* IdempotencyStore.IdempotencyStore
    const id = freshId({ operation })
    const request = reserveRequest(id, { lease })
    const reservation = expectReserved(yield* store.reserve(request))
    return { id, token: request.token, attempt: reservation.attempt }
  })

const target = (id: IdempotencyRecord.RecordId) => ({ operation: id.operation, key: id.key })

const refusal = (effect: Effect.Effect<void, unknown, Services>) =>
  Effect.map(Effect.either(effect), (result) => {
    if (Either.isRight(result)) return assert.fail("expected the unblock to be refused")
    const error = result.left as { readonly _tag?: string; readonly reason?: string; readonly attempt?: number }
    assert.strictEqual(error._tag, "UnblockRefused")
    return error as IdempotencyAdmin.UnblockRefused
  })

/**
 * The checks of the suite, for a runner of your own.
 *
 * @since 0.1.0
 * @category constructors
 */
export const checks = (): ReadonlyArray<Check> => [
  {
    name: "a record stuck in progress is listed, shown without its token, and unblocked; the stale owner is fenced out",
    run: Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const operation = operationName()
      const stuck = yield* reserved(operation, Duration.zero)
      const page = yield* admin.list({ state: "stuck", operation })
      assert.deepStrictEqual(page.records.map((record) => record.key), [stuck.id.key])
      const info = Option.getOrThrow(yield* admin.get(target(stuck.id)))
      assert.strictEqual(info.state, "stuck")
      assert.strictEqual(info.status, "IN_PROGRESS")
      assert.strictEqual(info.attempt, 1)
      assert.strictEqual(info.operation, operation)
      assert.notInclude(JSON.stringify(info), stuck.token)
      yield* admin.unblock(target(stuck.id), { reason: "the process was killed", expect: { attempt: 1 } })
      assert.isTrue(Option.isNone(yield* admin.get(target(stuck.id))))
      // the next attempt executes, and the stale owner's writes fail
      const next = reserveRequest(stuck.id)
      expectReserved(yield* store.reserve(next))
      expectLeaseLost(
        yield* Effect.either(
          store.complete({
            id: stuck.id,
            token: stuck.token,
            outcome: IdempotencyRecord.StoredOutcome.Success({ value: "\"stale\"" }),
            ttl: Duration.hours(1)
          })
        )
      )
      yield* store.complete({
        id: stuck.id,
        token: next.token,
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: "\"fresh\"" }),
        ttl: Duration.hours(1)
      })
      const recorded = Option.getOrThrow(yield* admin.get(target(stuck.id), { outcome: true }))
      assert.strictEqual(recorded.state, "completed")
      assert.strictEqual(recorded.outcomeText, "\"fresh\"")
      assert.deepStrictEqual(recorded.outcome, { kind: "Success", bytes: 7 })
    })
  },
  {
    name: "a live lease is never unblocked",
    run: Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const running = yield* reserved(operationName(), Duration.hours(1))
      const refused = yield* refusal(admin.unblock(target(running.id), { reason: "r", expect: { attempt: 1 } }))
      assert.strictEqual(refused.reason, "running")
      assert.strictEqual(Option.getOrThrow(yield* admin.get(target(running.id))).state, "running")
    })
  },
  {
    name: "an unblock that expects another attempt than the record's changes nothing",
    run: Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const stuck = yield* reserved(operationName(), Duration.zero)
      // a retry took it over meanwhile: attempt 2, stuck as well
      const takeover = expectReserved(yield* store.reserve(reserveRequest(stuck.id, { lease: Duration.zero })))
      assert.strictEqual(takeover.attempt, 2)
      const refused = yield* refusal(admin.unblock(target(stuck.id), { reason: "r", expect: { attempt: 1 } }))
      assert.strictEqual(refused.reason, "changed")
      assert.strictEqual(refused.attempt, 2)
      assert.strictEqual(Option.getOrThrow(yield* admin.get(target(stuck.id))).attempt, 2)
    })
  },
  {
    name: "an unknown or failed record is unblocked; a completed one, an omitted one or an absent one is not",
    run: Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const operation = operationName()
      const complete = (outcome: IdempotencyRecord.StoredOutcome) =>
        Effect.gen(function*() {
          const record = yield* reserved(operation, Duration.hours(1))
          yield* store.complete({ id: record.id, token: record.token, outcome, ttl: Duration.hours(1) })
          return record
        })
      const unknown = yield* complete(IdempotencyRecord.StoredOutcome.Timeout())
      const completed = yield* complete(IdempotencyRecord.StoredOutcome.Success({ value: "1" }))
      const omitted = yield* complete(IdempotencyRecord.StoredOutcome.Omitted({ reason: "too large" }))
      const failed = yield* reserved(operation, Duration.hours(1))
      yield* store.markFailed({ id: failed.id, token: failed.token, ttl: Duration.hours(1) })
      assert.strictEqual(Option.getOrThrow(yield* admin.get(target(unknown.id))).state, "unknown")
      assert.strictEqual(Option.getOrThrow(yield* admin.get(target(failed.id))).state, "failed")
      yield* admin.unblock(target(unknown.id), { reason: "r", expect: { attempt: 1 } })
      yield* admin.unblock(target(failed.id), { reason: "r", expect: { attempt: 1 } })
      assert.isTrue(Option.isNone(yield* admin.get(target(unknown.id))))
      assert.isTrue(Option.isNone(yield* admin.get(target(failed.id))))
      const reasons = [
        (yield* refusal(admin.unblock(target(completed.id), { reason: "r", expect: { attempt: 1 } }))).reason,
        (yield* refusal(admin.unblock(target(omitted.id), { reason: "r", expect: { attempt: 1 } }))).reason,
        (yield* refusal(admin.unblock(target(freshId({ operation })), { reason: "r", expect: { attempt: 1 } })))
          .reason
      ]
      assert.deepStrictEqual(reasons, ["completed", "omitted", "absent"])
    })
  },
  {
    name: "list pages through an operation's records by state and age; stats counts them",
    run: Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const operation = operationName()
      const stuck = yield* Effect.forEach(Array.from({ length: 5 }), () => reserved(operation, Duration.zero))
      for (let i = 0; i < 3; i++) {
        const record = yield* reserved(operation, Duration.hours(1))
        yield* store.complete({
          id: record.id,
          token: record.token,
          outcome: IdempotencyRecord.StoredOutcome.Success({ value: String(i) }),
          ttl: Duration.hours(1)
        })
      }
      const seen: Array<string> = []
      let cursor: string | undefined
      for (let pages = 0; pages < 20; pages++) {
        const page = yield* admin.list({ state: "stuck", operation, limit: 2, cursor })
        assert.isAtMost(page.records.length, 2)
        for (const record of page.records) {
          assert.strictEqual(record.state, "stuck")
          seen.push(record.key)
        }
        cursor = page.cursor
        if (cursor === undefined) break
      }
      assert.deepStrictEqual(seen.sort(), stuck.map((record) => record.id.key as string).sort())
      assert.deepStrictEqual((yield* admin.list({ state: "stuck", operation, olderThan: "1 hour" })).records, [])
      const counts = (yield* admin.stats).filter((count) => count.operation === operation)
      assert.deepStrictEqual(
        Object.fromEntries(counts.map((count) => [count.state, count.count])),
        { stuck: 5, completed: 3 }
      )
    })
  },
  {
    name: "a key that is not valid is refused before the store is read",
    run: Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const result = yield* Effect.either(admin.get({ operation: "o", key: "not a key\u0000" }))
      assert.isTrue(Either.isLeft(result) && result.left._tag === "InvalidTarget")
    })
  }
]

/**
 * Registers the suite over `storeLayer` (with `IdempotencyAdmin.layer` on top of it).
 *
 * @since 0.1.0
 * @category constructors
 */
export const suite = <E>(
  name: string,
  storeLayer: Layer.Layer<IdempotencyStore.IdempotencyStore, E>,
  options?: Options
) =>
  layer(Layer.provideMerge(IdempotencyAdmin.layer, storeLayer), {
    timeout: options?.timeout ?? Duration.seconds(60)
  })(name, (it) => {
    for (const { name, run } of checks()) it.effect(name, () => run)
  })
