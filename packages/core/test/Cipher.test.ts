/**
 * The two backends of `IdempotencyEncryption`'s cipher produce the same bytes: Node's `crypto`
 * module and WebCrypto seal to the same ciphertext and tag for the same key, IV and associated data,
 * each opens what the other sealed, both refuse a ciphertext with one byte changed or opened under
 * other associated data, and their HMAC-SHA-256 agree; `Buffer`'s base64url is as strict as the
 * JavaScript codec. On this Node the wrapper uses Node's module and `Buffer`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Cipher from "../src/internal/cipher.js"

const node = Cipher.builtinNodeCrypto()

const bytes = (length: number) => globalThis.crypto.getRandomValues(new Uint8Array(length))

describe("the cipher's backends", () => {
  it("Node's module is the one used where the runtime hands it over", () => {
    assert.isDefined(node, "process.getBuiltinModule('node:crypto') on Node 20.16 or later")
    assert.strictEqual(Cipher.preferred().name, "node")
  })

  it.effect("AES-256-GCM: the same bytes on both, each opens the other's, a changed byte or other associated data is refused", () =>
    Effect.gen(function*() {
      const backends = [Cipher.nodeCrypto(node!), Cipher.webCrypto] as const
      const cases = FastCheck.sample(
        FastCheck.record({
          plaintext: FastCheck.oneof(
            FastCheck.uint8Array({ maxLength: 64 }),
            FastCheck.uint8Array({ minLength: 10_000, maxLength: 10_300 })
          ),
          aad: FastCheck.uint8Array({ maxLength: 200 }),
          flip: FastCheck.nat()
        }),
        60
      )
      for (const { aad, flip, plaintext } of cases) {
        const raw = bytes(32)
        const iv = bytes(12)
        const [fromNode, fromWeb] = yield* Effect.forEach(backends, (backend) => backend.aes(raw))
        const sealedByNode = yield* fromNode!.encrypt(iv, aad, plaintext)
        const sealedByWeb = yield* fromWeb!.encrypt(iv, aad, plaintext)
        assert.deepStrictEqual(sealedByNode, sealedByWeb)
        assert.strictEqual(sealedByNode.length, plaintext.length + 16)
        assert.deepStrictEqual(yield* fromWeb!.decrypt(iv, aad, sealedByNode), plaintext)
        assert.deepStrictEqual(yield* fromNode!.decrypt(iv, aad, sealedByWeb), plaintext)

        const changed = Uint8Array.from(sealedByNode)
        changed[flip % changed.length]! ^= 1
        const otherAad = Uint8Array.from([...aad, 0])
        for (const aes of [fromNode!, fromWeb!]) {
          assert.isTrue(Exit.isFailure(yield* Effect.exit(aes.decrypt(iv, aad, changed))))
          assert.isTrue(Exit.isFailure(yield* Effect.exit(aes.decrypt(iv, otherAad, sealedByNode))))
          assert.isTrue(Exit.isFailure(yield* Effect.exit(aes.decrypt(iv, aad, sealedByNode.subarray(0, 15)))))
        }
      }
    }))

  it.effect("HMAC-SHA-256: the same digest on both", () =>
    Effect.gen(function*() {
      for (const data of FastCheck.sample(FastCheck.uint8Array({ maxLength: 300 }), 60)) {
        const raw = bytes(32)
        const byNode = yield* Effect.flatMap(Cipher.nodeCrypto(node!).hmac(raw), (mac) => mac.sign(data))
        const byWeb = yield* Effect.flatMap(Cipher.webCrypto.hmac(raw), (mac) => mac.sign(data))
        assert.strictEqual(byNode.length, 32)
        assert.deepStrictEqual(Uint8Array.from(byNode), byWeb)
      }
    }))

  it("base64url: Buffer's codec writes the JavaScript one's text and refuses exactly what it refuses", () => {
    const Buffer = Cipher.builtinBuffer()
    assert.isDefined(Buffer, "process.getBuiltinModule('node:buffer')")
    const native = Cipher.bufferBase64url(Buffer!)
    for (const data of FastCheck.sample(FastCheck.uint8Array({ maxLength: 400 }), 300)) {
      const text = Cipher.base64url.encode(data)
      assert.strictEqual(native.encode(data), text)
      assert.deepStrictEqual(native.decode(text), data)
      assert.deepStrictEqual(Cipher.base64url.decode(text), data)
    }
    // texts near the alphabet: padding, the other alphabet's characters, spaces, non-canonical endings
    const texts = FastCheck.sample(
      FastCheck.stringOf(FastCheck.constantFrom(..."AQgw_-+/= \n.éAB01xyz".split("")), { maxLength: 12 }),
      3000
    )
    for (const text of texts) {
      assert.deepStrictEqual(native.decode(text), Cipher.base64url.decode(text), JSON.stringify(text))
    }
    assert.strictEqual(Cipher.preferred().base64url.encode(Uint8Array.from([0, 1, 254, 255])), "AAH-_w")
  })

  it.effect("a key that is not 32 bytes is refused by both", () =>
    Effect.gen(function*() {
      for (const backend of [Cipher.nodeCrypto(node!), Cipher.webCrypto]) {
        assert.isTrue(Exit.isFailure(yield* Effect.exit(backend.aes(bytes(16)))), backend.name)
      }
    }))
})
