import {
  Idempotency,
  IdempotencyAdmin,
  IdempotencyEncryption,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import * as StoreEncryption from "@effect-idempotency/test-support/StoreEncryption"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

StoreEncryption.suite("memory store encryption", IdempotencyStore.layerMemoryWith({ warn: false }))

const A = StoreEncryption.freshKey("a")
const binding = { recordId: "op#key-1", token: "token-1", kind: "Success" }
const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes))

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("IdempotencyEncryption", () => {
  it.effect("an envelope is v1.<keyId>.<iv>.<ciphertext and tag>, of the length envelopeLength states", () =>
    Effect.gen(function*() {
      const sealer = yield* IdempotencyEncryption.makeSealer({ keys: [A] })
      for (const plaintext of ["", "{}", "{\"card\":\"4242\"}", "é".repeat(1000), "x".repeat(70_000)]) {
        const envelope = yield* sealer.seal(plaintext, binding)
        const parts = envelope.split(".")
        assert.strictEqual(parts.length, 4)
        assert.deepStrictEqual(parts.slice(0, 2), ["v1", A.id])
        assert.strictEqual(parts[2]!.length, 16)
        assert.strictEqual(
          envelope.length,
          IdempotencyEncryption.envelopeLength(A.id, new TextEncoder().encode(plaintext).byteLength)
        )
        assert.strictEqual(yield* sealer.open(envelope, binding), plaintext)
      }
      // a random IV: the same plaintext never seals alike
      assert.notStrictEqual(yield* sealer.seal("{}", binding), yield* sealer.seal("{}", binding))
    }))

  it.effect("every character of an envelope replaced by another is refused", () =>
    Effect.gen(function*() {
      const sealer = yield* IdempotencyEncryption.makeSealer({ keys: [A] })
      const envelope = yield* sealer.seal("{\"card\":\"4242\"}", binding)
      assert.strictEqual((envelope.split(".")[3]!.length) % 4, 2)
      const alphabet = Array.from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
      for (let i = 0; i < envelope.length; i++) {
        // the last character carries unused bits: every other character there is tried
        for (const replacement of i === envelope.length - 1 ? alphabet : ["A", "B", "-", "."]) {
          if (envelope[i] === replacement) continue
          const altered = envelope.slice(0, i) + replacement + envelope.slice(i + 1)
          const exit = yield* Effect.exit(sealer.open(altered, binding))
          assert.isTrue(Exit.isFailure(exit), `character ${i} replaced by ${replacement}`)
        }
      }
    }))

  it.effect("an envelope opens only for the record, the attempt and the kind it was sealed for", () =>
    Effect.gen(function*() {
      const sealer = yield* IdempotencyEncryption.makeSealer({ keys: [A] })
      const envelope = yield* sealer.seal("{}", binding)
      for (
        const other of [
          { ...binding, recordId: "op#key-2" },
          { ...binding, recordId: "op#scope#key-1" },
          { ...binding, token: "token-2" },
          { ...binding, kind: "Failure" }
        ]
      ) {
        const error = yield* Effect.flip(sealer.open(envelope, other))
        assert.strictEqual(error.reason, "Unauthentic")
        assert.strictEqual(error.recordId, other.recordId)
      }
    }))

  it.effect("keysConfig reads id:base64key pairs as Redacted; the first seals", () =>
    Effect.gen(function*() {
      const one = globalThis.crypto.getRandomValues(new Uint8Array(32))
      const two = globalThis.crypto.getRandomValues(new Uint8Array(32))
      const keys = yield* IdempotencyEncryption.keysConfig().pipe(
        withEnv({ IDEMPOTENCY_KEYS: `k2:${base64(two)}, k1:${base64(one).replace(/=+$/, "")}` })
      )
      assert.deepStrictEqual(keys.map((key) => key.id), ["k2", "k1"])
      assert.isTrue(Redacted.isRedacted(keys[0]!.key))
      const sealer = yield* IdempotencyEncryption.makeSealer({ keys })
      assert.isTrue((yield* sealer.seal("{}", binding)).startsWith("v1.k2."))
      // the same key given as bytes opens it
      const k1 = yield* IdempotencyEncryption.makeSealer({ keys: [{ id: "k1", key: Redacted.make(one) }] })
      const sealedByK1 = yield* IdempotencyEncryption.makeSealer({ keys: [keys[1]!] })
      assert.strictEqual(yield* k1.open(yield* sealedByK1.seal("{}", binding), binding), "{}")
    }))

  it.effect("bad key material is a ConfigError, or InvalidKeys at layer build, and never shows the material", () =>
    Effect.gen(function*() {
      const short = base64(new Uint8Array(16).fill(7))
      for (
        const value of [
          `k1:${short}`,
          "k1",
          `k.1:${base64(new Uint8Array(32))}`,
          `k1:${base64(new Uint8Array(32))},k1:${base64(new Uint8Array(32))}`,
          "k1:not base64!"
        ]
      ) {
        const exit = yield* Effect.exit(IdempotencyEncryption.keysConfig().pipe(withEnv({ IDEMPOTENCY_KEYS: value })))
        assert.isTrue(Exit.isFailure(exit), value)
        assert.notInclude(String(exit), short)
      }
      const refused = yield* Effect.flip(
        Layer.build(
          IdempotencyEncryption.layer({ keys: [{ id: "k1", key: Redacted.make(short) }] }).pipe(
            Layer.provide(IdempotencyStore.layerMemoryWith({ warn: false }))
          )
        ).pipe(Effect.scoped)
      )
      assert.strictEqual(refused._tag, "InvalidKeys")
      assert.strictEqual(refused.message, "invalid encryption keys (key \"k1\"): the key is 16 bytes, not 32")
      const none = yield* Effect.flip(IdempotencyEncryption.makeSealer({ keys: [] }))
      assert.strictEqual(none._tag, "InvalidKeys")
    }))

  it.effect("layerConfig wraps the store of the context with the keys of the environment", () =>
    Effect.gen(function*() {
      const operation = Idempotency.make({
        name: "config",
        payload: Schema.Struct({}),
        success: Schema.String,
        execute: () => Effect.succeed("plaintext-value")
      })
      const raw = yield* IdempotencyStore.makeMemory({ warn: false })
      const sealed = IdempotencyEncryption.layerConfig({ keys: IdempotencyEncryption.keysConfig() }).pipe(
        Layer.provide(Layer.succeed(IdempotencyStore.IdempotencyStore, raw))
      )
      const value = yield* operation.run({ key: "k-1", payload: {} }).pipe(
        Effect.provide(sealed),
        withEnv({ IDEMPOTENCY_KEYS: `env:${base64(new Uint8Array(32).fill(1))}` })
      )
      assert.strictEqual(value, "plaintext-value")
      const record = yield* raw.get(
        IdempotencyRecord.makeRecordId({ operation: "config", key: IdempotencyKey.unsafeMake("k-1") })
      )
      assert.isTrue(Option.isSome(record))
      const body = IdempotencyRecord.outcomeToColumns(Option.getOrThrow(record).outcome!).body
      assert.isTrue(body.startsWith("v1.env."))
    }))

  it.effect("an outcome recorded before encryption is refused, unless acceptPlaintext", () =>
    Effect.gen(function*() {
      const raw = yield* IdempotencyStore.makeMemory({ warn: false })
      const operation = Idempotency.make({
        name: "legacy",
        payload: Schema.Struct({}),
        success: Schema.String,
        execute: () => Effect.succeed("before")
      })
      const run = (store: IdempotencyStore.IdempotencyStore["Type"]) =>
        operation.runDetailed({ key: "k-1", payload: {} }).pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, store)
        )
      yield* run(raw)
      const strict = yield* IdempotencyEncryption.make(raw, { keys: [A] })
      const error = yield* Effect.flip(run(strict))
      assert.strictEqual(Option.getOrThrow(IdempotencyEncryption.unreadableOf(error)).reason, "Plaintext")
      const lenient = yield* IdempotencyEncryption.make(raw, { keys: [A], acceptPlaintext: true })
      const replay = yield* run(lenient)
      assert.isTrue(replay.replayed)
      assert.strictEqual(replay.value, "before")
    }))

  it.effect("the admin shows metadata and the sealed outcome without the keys, the plaintext with them", () =>
    Effect.gen(function*() {
      const raw = yield* IdempotencyStore.makeMemory({ warn: false })
      const sealed = yield* IdempotencyEncryption.make(raw, { keys: [A] })
      const operation = Idempotency.make({
        name: "admin",
        payload: Schema.Struct({}),
        success: Schema.String,
        execute: () => Effect.succeed("card-4242")
      })
      yield* operation.run({ key: "k-1", payload: {} }).pipe(
        Effect.provideService(IdempotencyStore.IdempotencyStore, sealed)
      )
      const target = { operation: "admin", key: "k-1" }
      const store = Layer.succeed(IdempotencyStore.IdempotencyStore, sealed)
      const plain = yield* Effect.flatMap(
        IdempotencyAdmin.IdempotencyAdmin,
        (admin) => admin.get(target, { outcome: true })
      ).pipe(Effect.provide(IdempotencyAdmin.layer.pipe(Layer.provide(store))))
      const info = Option.getOrThrow(plain)
      assert.strictEqual(info.state, "completed")
      assert.isTrue(info.outcomeText!.startsWith(`v1.${A.id}.`))
      assert.notInclude(info.outcomeText!, "card-4242")

      const opened = yield* Effect.flatMap(
        IdempotencyAdmin.IdempotencyAdmin,
        (admin) => admin.get(target, { outcome: true })
      ).pipe(
        Effect.provide(IdempotencyEncryption.layerAdmin({ keys: [A] }).pipe(Layer.provide(store)))
      )
      assert.strictEqual(Option.getOrThrow(opened).outcomeText, JSON.stringify("card-4242"))
      const listed = yield* Effect.flatMap(IdempotencyAdmin.IdempotencyAdmin, (admin) => admin.list()).pipe(
        Effect.provide(IdempotencyEncryption.layerAdmin({ keys: [A] }).pipe(Layer.provide(store)))
      )
      assert.strictEqual(listed.records.length, 1)
      const other = StoreEncryption.freshKey("other")
      const refused = yield* Effect.flip(
        Effect.flatMap(IdempotencyAdmin.IdempotencyAdmin, (admin) => admin.get(target, { outcome: true })).pipe(
          Effect.provide(IdempotencyEncryption.layerAdmin({ keys: [other] }).pipe(Layer.provide(store)))
        )
      )
      assert.strictEqual(Option.getOrThrow(IdempotencyEncryption.unreadableOf(refused)).reason, "UnknownKey")
    }))

  it.effect("a store failure of the wrapped store passes through unchanged", () =>
    Effect.gen(function*() {
      const raw = yield* IdempotencyStore.makeMemory({ warn: false })
      const sealed = yield* IdempotencyEncryption.make(raw, { keys: [A] })
      const id = IdempotencyRecord.makeRecordId({ operation: "x", key: IdempotencyKey.unsafeMake("k") })
      const lost = yield* Effect.flip(sealed.complete({
        id,
        token: "not-held",
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: "{}" }),
        ttl: Duration.minutes(1)
      }))
      assert.strictEqual(lost._tag, "LeaseLost")
    }))
})
