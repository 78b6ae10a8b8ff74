/**
 * `OutcomeCodec`: the encoding and the replay of `Idempotency.make`, for engines of their own. A
 * record written through the codec replays through `Idempotency.make` and the other way round; an
 * encoder that throws is an outcome kept as omitted, with a reason that does not echo the value.
 */
import {
  Fingerprint,
  Idempotency,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore,
  OutcomeCodec
} from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

const Payload = Schema.Struct({ n: Schema.Int })
const Order = Schema.Struct({ orderId: Schema.String, at: Schema.DateFromString })
class Rejected extends Schema.TaggedError<Rejected>()("Rejected", { why: Schema.String }) {}

const codec = OutcomeCodec.make({ name: "codec-order", success: Order, failure: Rejected })

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return Option.getOrUndefined(Cause.failureOption((exit as Exit.Failure<unknown, unknown>).cause))
}

/** A COMPLETED record of `key` on `store`, written with `outcome` as another engine would. */
const completeWith = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  key: string,
  outcome: IdempotencyRecord.StoredOutcome
) =>
  Effect.gen(function*() {
    const id = IdempotencyRecord.makeRecordId({ operation: codec.name, key: IdempotencyKey.unsafeMake(key) })
    const fingerprint = yield* Fingerprint.make(Payload)({ n: 1 })
    const token = "token-1"
    const ttl = Duration.minutes(5)
    yield* store.reserve({ id, token, fingerprint, lease: Duration.seconds(30), ttl, takeover: true })
    yield* store.complete({ id, token, outcome, ttl })
    return id
  })

describe("OutcomeCodec", () => {
  it.effect("a success encoded by the codec replays through Idempotency.make, decoded", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const executions = yield* Ref.make(0)
      const encoded = yield* codec.encodeSuccess({ orderId: "o-1", at: new Date("2026-01-02T03:04:05.000Z") })
      assert.strictEqual(encoded._tag, "Encoded")
      yield* completeWith(store, "k-1", encoded.outcome)
      const operation = Idempotency.make({
        name: codec.name,
        payload: Payload,
        success: Order,
        failure: Rejected,
        execute: () => Effect.as(Ref.update(executions, (n) => n + 1), { orderId: "o-2", at: new Date(0) })
      })
      const replayed = yield* operation.runDetailed({ key: "k-1", payload: { n: 1 } }).pipe(
        Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      )
      assert.isTrue(replayed.replayed)
      assert.strictEqual(replayed.value.orderId, "o-1")
      assert.strictEqual(replayed.value.at.toISOString(), "2026-01-02T03:04:05.000Z")
      assert.strictEqual(yield* Ref.get(executions), 0)
    }))

  it.effect("a record completed by Idempotency.make replays through the codec: a value, or the stored failure", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const operation = Idempotency.make({
        name: codec.name,
        payload: Payload,
        success: Order,
        failure: Rejected,
        execute: ({ n }) =>
          n === 1 ? Effect.succeed({ orderId: "o-1", at: new Date(5) }) : Effect.fail(new Rejected({ why: "no" }))
      })
      const provide = Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      yield* provide(operation.run({ key: "k-ok", payload: { n: 1 } }))
      yield* provide(Effect.exit(operation.run({ key: "k-no", payload: { n: 2 } })))
      const recordOf = (key: string) =>
        Effect.map(
          store.get(IdempotencyRecord.makeRecordId({ operation: codec.name, key: IdempotencyKey.unsafeMake(key) })),
          Option.getOrThrow
        )
      const ok = yield* codec.replay(yield* recordOf("k-ok"), { key: "k-ok", timeoutMillis: 1 })
      assert.deepStrictEqual({ replayed: ok.replayed, at: ok.value.at.getTime() }, { replayed: true, at: 5 })
      const no = failureOf(yield* Effect.exit(codec.replay(yield* recordOf("k-no"), { key: "k-no", timeoutMillis: 1 })))
      assert.instanceOf(no, Rejected)
    }))

  it.effect("an encoder that throws: NotEncoded, recorded as Omitted, with a reason that does not echo the value", () =>
    Effect.gen(function*() {
      const Throwing = Schema.String.pipe(Schema.transform(Schema.String, {
        decode: (s) => s,
        encode: (s) => {
          throw new RangeError(`cannot encode ${s}`)
        }
      }))
      const encoded = yield* OutcomeCodec.make({ name: "codec-throws", success: Throwing }).encodeSuccess(
        "secret-value"
      )
      assert.strictEqual(encoded._tag, "NotEncoded")
      assert.strictEqual(encoded.outcome._tag, "Omitted")
      assert.include(encoded._tag === "NotEncoded" ? encoded.reason : "", "RangeError")
      assert.notInclude(JSON.stringify(encoded), "secret-value")
    }))

  it.effect("a stored outcome that no longer decodes replays as StoredOutcomeInvalid", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const id = yield* completeWith(
        store,
        "k-bad",
        IdempotencyRecord.StoredOutcome.Success({ value: "{\"orderId\":1}" })
      )
      const record = Option.getOrThrow(yield* store.get(id))
      const error = failureOf(yield* Effect.exit(codec.replay(record, { key: "k-bad", timeoutMillis: 1 }))) as {
        readonly _tag: string
      }
      assert.strictEqual(error._tag, "StoredOutcomeInvalid")
    }))
})
