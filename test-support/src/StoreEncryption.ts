/**
 * The encryption wrapper (`IdempotencyEncryption`) over a real store, written once and run by every
 * store's `Encryption.test.ts`: rotation, a key removed, a ciphertext moved to another record, a
 * flipped byte, and the keyed fingerprint. The layer is the raw store; each case wraps it with the
 * keys it needs and reads the raw records underneath. No `node:crypto`: the core runs it without.
 */
import type { IdempotencyError } from "@effect-idempotency/core"
import {
  Idempotency,
  IdempotencyEncryption,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

type Store = IdempotencyStore.IdempotencyStore["Type"]

/** A fresh random 32-byte key under `id` and a random suffix. */
export const freshKey = (id: string): IdempotencyEncryption.Key => ({
  id: `${id}-${globalThis.crypto.randomUUID().slice(0, 8)}`,
  key: Redacted.make(globalThis.crypto.getRandomValues(new Uint8Array(32)))
})

const Payload = Schema.Struct({ amount: Schema.Number })
const Card = Schema.Struct({ card: Schema.String })
const Declined = Schema.TaggedStruct("Declined", { detail: Schema.String })

/** An operation counting its executions; its success carries `secret`, a failure when `fail` is set. */
const counting = (options?: { readonly fail?: "store" | "markFailed" }) =>
  Effect.gen(function*() {
    const executions = yield* Ref.make(0)
    const secret = `secret-${globalThis.crypto.randomUUID()}`
    const operation = Idempotency.make({
      name: `encryption-${globalThis.crypto.randomUUID()}`,
      payload: Payload,
      success: Card,
      failure: Declined,
      onFailure: () => options?.fail ?? "store",
      execute: () =>
        Effect.flatMap(Ref.updateAndGet(executions, (n) => n + 1), (n) =>
          options?.fail !== undefined && (options.fail === "store" || n === 1)
            ? Effect.fail(Declined.make({ detail: secret }))
            : Effect.succeed({ card: secret }))
    })
    const run = (store: Store, key: string, payload = { amount: 10 }) =>
      operation.runDetailed({ key, payload }).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
    const id = (key: string) =>
      IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
    return { executions, secret, operation, run, id }
  })

/** The raw record of `id`, which must exist. */
const rawRecord = (raw: Store, id: IdempotencyRecord.RecordId) =>
  Effect.map(raw.get(id), (record) => Option.getOrThrowWith(record, () => new Error(`no record ${id.value}`)))

const bodyOf = (outcome: IdempotencyRecord.StoredOutcome | undefined): string => {
  assert.isDefined(outcome)
  return IdempotencyRecord.outcomeToColumns(outcome!).body
}

/** The typed error a run failed with, and that it is `RecordUnreadable` (inside a `StoreError`). */
const unreadable = <A>(exit: Exit.Exit<A, unknown>): IdempotencyEncryption.RecordUnreadable => {
  assert.isTrue(Exit.isFailure(exit), "the run failed")
  const failure = Cause.failureOption((exit as Exit.Failure<A, unknown>).cause)
  assert.isTrue(Option.isSome(failure), "with a typed failure, not a defect")
  const error = Option.getOrThrow(failure) as IdempotencyError.IdempotencyError
  assert.strictEqual(error._tag, "StoreError")
  return Option.getOrThrowWith(IdempotencyEncryption.unreadableOf(error), () => new Error("not RecordUnreadable"))
}

/** The envelope with one bit flipped in byte `at` of its IV (`part` 2) or its ciphertext and tag (`part` 3). */
export const flipped = (envelope: string, part: 2 | 3, at: number): string => {
  const parts = envelope.split(".")
  const bytes = Buffer.from(parts[part]!, "base64url")
  const index = at < 0 ? bytes.length + at : at
  bytes[index] = bytes[index]! ^ 1
  parts[part] = bytes.toString("base64url")
  return parts.join(".")
}

/** Options of the suite. */
export interface Options {
  /** For the layer to build. Default 60 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
}

/** Registers the encryption cases on the raw store `storeLayer`. */
export const suite = <E>(
  name: string,
  storeLayer: Layer.Layer<IdempotencyStore.IdempotencyStore, E>,
  options?: Options
) =>
  layer(storeLayer, { timeout: options?.timeout ?? Duration.seconds(60) })(name, (it) => {
    const A = freshKey("a")
    const B = freshKey("b")

    it.effect("an outcome is sealed under the first key, and opens after rotation while that key is listed", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const underA = yield* IdempotencyEncryption.make(raw, { keys: [A] })
        const underBA = yield* IdempotencyEncryption.make(raw, { keys: [B, A] })
        const { executions, id, run, secret } = yield* counting()
        const key = globalThis.crypto.randomUUID()

        const first = yield* run(underA, key)
        assert.isFalse(first.replayed)
        const sealed = bodyOf((yield* rawRecord(raw, id(key))).outcome)
        assert.isTrue(sealed.startsWith(`v1.${A.id}.`))
        assert.notInclude(sealed, secret)

        const replay = yield* run(underBA, key)
        assert.isTrue(replay.replayed)
        assert.deepStrictEqual(replay.value, { card: secret })
        assert.strictEqual(yield* Ref.get(executions), 1)

        const other = globalThis.crypto.randomUUID()
        yield* run(underBA, other)
        assert.isTrue(bodyOf((yield* rawRecord(raw, id(other))).outcome).startsWith(`v1.${B.id}.`))
      }))

    it.effect("a recorded failure is sealed too, and replayed as the same failure", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const underA = yield* IdempotencyEncryption.make(raw, { keys: [A] })
        const { executions, id, run, secret } = yield* counting({ fail: "store" })
        const key = globalThis.crypto.randomUUID()
        const first = yield* Effect.flip(run(underA, key))
        const record = yield* rawRecord(raw, id(key))
        assert.strictEqual(record.outcome?._tag, "Failure")
        assert.notInclude(bodyOf(record.outcome), secret)
        const replay = yield* Effect.flip(run(underA, key))
        assert.deepStrictEqual(replay, first)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))

    it.effect("a record sealed under a key no longer listed fails with RecordUnreadable; the downstream does not run", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const underA = yield* IdempotencyEncryption.make(raw, { keys: [A] })
        const underB = yield* IdempotencyEncryption.make(raw, { keys: [B] })
        const { executions, id, run, secret } = yield* counting()
        const key = globalThis.crypto.randomUUID()
        yield* run(underA, key)
        const before = yield* rawRecord(raw, id(key))

        const error = unreadable(yield* Effect.exit(run(underB, key)))
        assert.strictEqual(error.reason, "UnknownKey")
        assert.strictEqual(error.keyId, A.id)
        assert.notInclude(error.message, secret)
        assert.strictEqual(yield* Ref.get(executions), 1)
        // the record is left as it was: A, listed again, still replays it
        assert.deepStrictEqual(yield* rawRecord(raw, id(key)), before)
        assert.isTrue((yield* run(underA, key)).replayed)
      }))

    it.effect("a ciphertext copied through the raw store into another record does not open", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const underA = yield* IdempotencyEncryption.make(raw, { keys: [A] })
        const { executions, id, run } = yield* counting()
        const source = globalThis.crypto.randomUUID()
        yield* run(underA, source)
        const sealed = bodyOf((yield* rawRecord(raw, id(source))).outcome)

        // another key of the same operation, recorded by hand with the first record's envelope
        const target = globalThis.crypto.randomUUID()
        const token = globalThis.crypto.randomUUID()
        const fingerprint = yield* Idempotency.fingerprint(Payload, { amount: 10 })
        const reserved = yield* raw.reserve({
          id: id(target),
          token,
          fingerprint,
          lease: Duration.seconds(30),
          ttl: Duration.hours(1),
          takeover: true
        })
        assert.strictEqual(reserved._tag, "Reserved")
        yield* raw.complete({
          id: id(target),
          token,
          outcome: IdempotencyRecord.StoredOutcome.Success({ value: sealed }),
          ttl: Duration.hours(1)
        })

        const error = unreadable(yield* Effect.exit(run(underA, target)))
        assert.strictEqual(error.reason, "Unauthentic")
        assert.strictEqual(error.keyId, A.id)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))

    it.effect("one flipped byte of the IV, the ciphertext or the tag is detected; the downstream does not run", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        for (const [part, at] of [[2, 0], [3, 0], [3, -1]] as const) {
          // a store that alters the envelope it is given, under the wrapper
          const tampering: Store = {
            ...raw,
            complete: (request) => {
              const body = IdempotencyRecord.outcomeToColumns(request.outcome).body
              return raw.complete({
                ...request,
                outcome: IdempotencyRecord.StoredOutcome.Success({ value: flipped(body, part, at) })
              })
            }
          }
          const writer = yield* IdempotencyEncryption.make(tampering, { keys: [A] })
          const reader = yield* IdempotencyEncryption.make(raw, { keys: [A] })
          const { executions, run } = yield* counting()
          const key = globalThis.crypto.randomUUID()
          yield* run(writer, key)
          const error = unreadable(yield* Effect.exit(run(reader, key)))
          assert.strictEqual(error.reason, "Unauthentic", `byte ${at} of part ${part}`)
          assert.strictEqual(yield* Ref.get(executions), 1)
        }
      }))

    it.effect("the keyed fingerprint still tells a reused key, across a rotation of its key", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const F1 = freshKey("f1")
        const F2 = freshKey("f2")
        const underF1 = yield* IdempotencyEncryption.make(raw, { keys: [A], fingerprintKeys: [F1] })
        const underF2F1 = yield* IdempotencyEncryption.make(raw, { keys: [A], fingerprintKeys: [F2, F1] })
        const underF2 = yield* IdempotencyEncryption.make(raw, { keys: [A], fingerprintKeys: [F2] })
        const { executions, id, run } = yield* counting()
        const key = globalThis.crypto.randomUUID()

        yield* run(underF1, key)
        const stored = (yield* rawRecord(raw, id(key))).fingerprint
        assert.isTrue(stored.startsWith(`hmac-sha256:${F1.id}:`))
        assert.notStrictEqual(stored, yield* Idempotency.fingerprint(Payload, { amount: 10 }))

        for (const store of [underF1, underF2F1]) {
          assert.isTrue((yield* run(store, key)).replayed)
          const reused = yield* Effect.flip(run(store, key, { amount: 11 }))
          assert.strictEqual(reused._tag, "KeyReused")
        }
        const error = unreadable(yield* Effect.exit(run(underF2, key)))
        assert.strictEqual(error.reason, "UnknownKey")
        assert.strictEqual(error.keyId, F1.id)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))

    it.effect("a FAILED record keyed under a rotated fingerprint key is taken over by the same request", () =>
      Effect.gen(function*() {
        const raw = yield* IdempotencyStore.IdempotencyStore
        const F1 = freshKey("f1")
        const F2 = freshKey("f2")
        const underF1 = yield* IdempotencyEncryption.make(raw, { keys: [A], fingerprintKeys: [F1] })
        const underF2F1 = yield* IdempotencyEncryption.make(raw, { keys: [A], fingerprintKeys: [F2, F1] })
        const { executions, id, run, secret } = yield* counting({ fail: "markFailed" })
        const key = globalThis.crypto.randomUUID()
        yield* Effect.flip(run(underF1, key))
        assert.strictEqual((yield* rawRecord(raw, id(key))).status, "FAILED")

        const retried = yield* run(underF2F1, key)
        assert.isFalse(retried.replayed)
        assert.deepStrictEqual(retried.value, { card: secret })
        assert.strictEqual(retried.attempt, 2)
        assert.strictEqual(yield* Ref.get(executions), 2)
      }))
  })
