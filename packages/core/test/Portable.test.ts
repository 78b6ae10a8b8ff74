/**
 * The core without Node's built-in modules. This project's config makes `node:crypto` unavailable
 * (see `vitest.config.ts`): the first test checks that it is, so every other test of the core is
 * known to run without it. The hashes, computed in plain TypeScript, agree with the Web Crypto API
 * on any input, around SHA-256's block boundaries included.
 */
import { Fingerprint, IdempotencyContext, IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"

const webDigest = (bytes: Uint8Array<ArrayBuffer>) =>
  Effect.promise(() => globalThis.crypto.subtle.digest("SHA-256", bytes)).pipe(Effect.map((d) => new Uint8Array(d)))

const hexOf = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

const base64urlOf = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")

const utf8 = (text: string): Uint8Array<ArrayBuffer> => new Uint8Array(new TextEncoder().encode(text))

describe("a core without node:crypto", () => {
  it.effect("node:crypto cannot be loaded in this run", () =>
    Effect.gen(function*() {
      const loaded = yield* Effect.promise(() =>
        import("node:crypto").then(() => "loaded", (error: unknown) => String(error))
      )
      assert.include(loaded, "node:crypto is unavailable")
    }))

  it.effect("generated keys are UUID v4 (Web Crypto's randomUUID)", () =>
    Effect.gen(function*() {
      const key = yield* IdempotencyKey.generate
      assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    }))

  it.effect("fingerprints agree with Web Crypto's SHA-256 for strings of every length around the block size, and long ones", () =>
    Effect.gen(function*() {
      for (const length of [...Array.from({ length: 201 }, (_, i) => i), 5000, 70_000]) {
        const text = "a€😀".repeat(length).slice(0, length)
        const expected = hexOf(yield* webDigest(utf8(JSON.stringify(text))))
        assert.strictEqual(Fingerprint.fromEncoded(text), `sha256:${expected}`, `length ${length}`)
      }
    }))

  it.effect.prop(
    "fingerprints and step keys agree with Web Crypto's SHA-256 on any input, lone surrogates included",
    [FastCheck.fullUnicodeString({ maxLength: 300 }), FastCheck.string({ unit: "binary", maxLength: 80 })],
    ([text, step]) =>
      Effect.gen(function*() {
        assert.strictEqual(
          Fingerprint.fromEncoded(text),
          `sha256:${hexOf(yield* webDigest(utf8(JSON.stringify(text))))}`
        )
        const id = IdempotencyRecord.makeRecordId({ operation: text, key: IdempotencyKey.unsafeMake("k-1") })
        assert.strictEqual(
          IdempotencyContext.deriveStepKey(id, step),
          base64urlOf(yield* webDigest(utf8(`${id.value}\u0000${step}`)))
        )
      }),
    { fastCheck: { numRuns: 300 } }
  )
})
