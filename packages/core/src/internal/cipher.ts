/**
 * AES-256-GCM and HMAC-SHA-256 for `IdempotencyEncryption`, on one of two backends that produce
 * the same bytes: Node's `crypto` module, synchronous, where the runtime hands it over without an
 * import (`process.getBuiltinModule`, Node 20.16 and later), else WebCrypto (`crypto.subtle`), whose
 * calls are asynchronous and on Node each cost a trip through the thread pool.
 */
import * as Effect from "effect/Effect"

/** A 256-bit AES-GCM key: `encrypt` yields the ciphertext followed by the 16-byte tag. */
export interface Aes {
  readonly encrypt: (iv: Uint8Array, aad: Uint8Array, plaintext: Uint8Array) => Effect.Effect<Uint8Array, unknown>
  /** Fails when the tag does not match (altered, moved or sealed under other associated data). */
  readonly decrypt: (iv: Uint8Array, aad: Uint8Array, sealed: Uint8Array) => Effect.Effect<Uint8Array, unknown>
}

/** An HMAC-SHA-256 key. */
export interface Mac {
  readonly sign: (data: Uint8Array) => Effect.Effect<Uint8Array, unknown>
}

/** How keys are imported, and so which implementation seals and opens. */
export interface Backend {
  readonly name: "node" | "webcrypto"
  readonly aes: (raw: Uint8Array<ArrayBuffer>) => Effect.Effect<Aes, unknown>
  readonly hmac: (raw: Uint8Array<ArrayBuffer>) => Effect.Effect<Mac, unknown>
}

const TAG_BYTES = 16

/** WebCrypto: wherever `globalThis.crypto.subtle` is (Node, Workers, Deno, browsers). */
export const webCrypto: Backend = {
  name: "webcrypto",
  aes: (raw) =>
    Effect.map(
      Effect.tryPromise(() =>
        // 16 or 24 bytes would import as AES-128 or AES-192
        raw.length !== 32 ?
          Promise.reject(new Error("an AES-256 key is 32 bytes")) :
          globalThis.crypto.subtle.importKey("raw", raw, { name: "AES-GCM", length: 256 }, false, [
            "encrypt",
            "decrypt"
          ])
      ),
      (key): Aes => ({
        encrypt: (iv, aad, plaintext) =>
          Effect.map(
            Effect.tryPromise(() =>
              globalThis.crypto.subtle.encrypt(
                {
                  name: "AES-GCM",
                  iv: iv as Uint8Array<ArrayBuffer>,
                  additionalData: aad as Uint8Array<ArrayBuffer>,
                  tagLength: TAG_BYTES * 8
                },
                key,
                plaintext as Uint8Array<ArrayBuffer>
              )
            ),
            (sealed) => new Uint8Array(sealed)
          ),
        decrypt: (iv, aad, sealed) =>
          Effect.map(
            Effect.tryPromise(() =>
              globalThis.crypto.subtle.decrypt(
                {
                  name: "AES-GCM",
                  iv: iv as Uint8Array<ArrayBuffer>,
                  additionalData: aad as Uint8Array<ArrayBuffer>,
                  tagLength: TAG_BYTES * 8
                },
                key,
                sealed as Uint8Array<ArrayBuffer>
              )
            ),
            (plain) => new Uint8Array(plain)
          )
      })
    ),
  hmac: (raw) =>
    Effect.map(
      Effect.tryPromise(() =>
        globalThis.crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
      ),
      (key): Mac => ({
        sign: (data) =>
          Effect.map(
            Effect.tryPromise(() => globalThis.crypto.subtle.sign("HMAC", key, data as Uint8Array<ArrayBuffer>)),
            (mac) => new Uint8Array(mac)
          )
      })
    )
}

// the part of Node's `crypto` module used here, typed without depending on Node's declarations
interface NodeCipher {
  setAAD(aad: Uint8Array): unknown
  update(data: Uint8Array): Uint8Array
  final(): Uint8Array
}
interface NodeCrypto {
  createSecretKey(key: Uint8Array): unknown
  createCipheriv(
    algorithm: "aes-256-gcm",
    key: unknown,
    iv: Uint8Array,
    options: { authTagLength: number }
  ): NodeCipher & { getAuthTag(): Uint8Array }
  createDecipheriv(
    algorithm: "aes-256-gcm",
    key: unknown,
    iv: Uint8Array,
    options: { authTagLength: number }
  ): NodeCipher & { setAuthTag(tag: Uint8Array): unknown }
  createHmac(algorithm: "sha256", key: unknown): { update(data: Uint8Array): unknown; digest(): Uint8Array }
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let length = 0
  for (const part of parts) length += part.length
  const out = new Uint8Array(length)
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** Node's `crypto` module over the same interface. */
export const nodeCrypto = (crypto: NodeCrypto): Backend => ({
  name: "node",
  aes: (raw) =>
    Effect.try(() => {
      if (raw.length !== 32) throw new Error("an AES-256 key is 32 bytes")
      const key = crypto.createSecretKey(raw)
      return {
        encrypt: (iv, aad, plaintext) =>
          Effect.try(() => {
            const cipher = crypto.createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
            cipher.setAAD(aad)
            const head = cipher.update(plaintext)
            const tail = cipher.final()
            return concat([head, tail, cipher.getAuthTag()])
          }),
        decrypt: (iv, aad, sealed) =>
          Effect.try(() => {
            if (sealed.length < TAG_BYTES) throw new Error("shorter than the tag")
            const decipher = crypto.createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
            decipher.setAAD(aad)
            decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
            const head = decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES))
            // throws when the tag does not match
            return concat([head, decipher.final()])
          })
      } satisfies Aes
    }),
  hmac: (raw) =>
    Effect.try(() => {
      const key = crypto.createSecretKey(raw)
      return {
        sign: (data) =>
          Effect.try(() => {
            const mac = crypto.createHmac("sha256", key)
            mac.update(data)
            return mac.digest()
          })
      } satisfies Mac
    })
})

/**
 * Node's `crypto` module when the runtime hands it over without an import and it seals, opens and
 * signs a byte, else `undefined`.
 */
export const builtinNodeCrypto = (): NodeCrypto | undefined => {
  try {
    const process = (globalThis as {
      readonly process?: { readonly getBuiltinModule?: (id: string) => unknown }
    }).process
    const crypto = typeof process?.getBuiltinModule === "function"
      ? process.getBuiltinModule("node:crypto") as Partial<NodeCrypto> | undefined
      : undefined
    if (
      typeof crypto?.createCipheriv !== "function" || typeof crypto.createDecipheriv !== "function" ||
      typeof crypto.createHmac !== "function" || typeof crypto.createSecretKey !== "function"
    ) return undefined
    // a runtime that emulates the module (a Worker's nodejs_compat) may list what it cannot run: try it
    const node = crypto as NodeCrypto
    const key = node.createSecretKey(new Uint8Array(32))
    const iv = new Uint8Array(12)
    const cipher = node.createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(new Uint8Array(1))
    const sealed = concat([cipher.update(new Uint8Array([42])), cipher.final()])
    const decipher = node.createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
    decipher.setAAD(new Uint8Array(1))
    decipher.setAuthTag(cipher.getAuthTag())
    const opened = concat([decipher.update(sealed), decipher.final()])
    const mac = node.createHmac("sha256", key)
    mac.update(opened)
    return opened.length === 1 && opened[0] === 42 && mac.digest().length === 32 ? node : undefined
  } catch {
    return undefined
  }
}

/** Node's module where there is one, else WebCrypto. */
export const preferred = (): Backend => {
  const crypto = builtinNodeCrypto()
  return crypto === undefined ? webCrypto : nodeCrypto(crypto)
}
