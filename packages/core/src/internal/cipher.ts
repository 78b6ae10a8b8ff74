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
  /** How envelopes write bytes: the runtime's own codec where there is one. */
  readonly base64url: Base64url
  readonly aes: (raw: Uint8Array<ArrayBuffer>) => Effect.Effect<Aes, unknown>
  readonly hmac: (raw: Uint8Array<ArrayBuffer>) => Effect.Effect<Mac, unknown>
}

const TAG_BYTES = 16

/** base64url without padding; `decode` is strict (one text per byte string), `undefined` when it is not one. */
export interface Base64url {
  readonly encode: (bytes: Uint8Array) => string
  readonly decode: (text: string) => Uint8Array<ArrayBuffer> | undefined
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
const CODES = Array.from(ALPHABET, (c) => c.charCodeAt(0))
const VALUES = (() => {
  const values = new Int16Array(128).fill(-1)
  for (let i = 0; i < ALPHABET.length; i++) values[ALPHABET.charCodeAt(i)] = i
  return values
})()
// below the engines' limit on arguments of `String.fromCharCode.apply`
const CHUNK = 8192

const toBase64url = (bytes: Uint8Array): string => {
  const codes = new Array<number>(Math.ceil((bytes.length * 4) / 3))
  let at = 0
  let i = 0
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    codes[at++] = CODES[n >>> 18]!
    codes[at++] = CODES[(n >>> 12) & 63]!
    codes[at++] = CODES[(n >>> 6) & 63]!
    codes[at++] = CODES[n & 63]!
  }
  const rest = bytes.length - i
  if (rest > 0) {
    const n = (bytes[i]! << 16) | (rest === 2 ? bytes[i + 1]! << 8 : 0)
    codes[at++] = CODES[n >>> 18]!
    codes[at++] = CODES[(n >>> 12) & 63]!
    if (rest === 2) codes[at++] = CODES[(n >>> 6) & 63]!
  }
  let out = ""
  for (let c = 0; c < codes.length; c += CHUNK) out += String.fromCharCode.apply(null, codes.slice(c, c + CHUNK))
  return out
}

const valueAt = (text: string, i: number): number => {
  const code = text.charCodeAt(i)
  return code < 128 ? VALUES[code]! : -1
}

/** Strict: one text per byte string (unused trailing bits must be zero), so no altered character goes unseen. */
const fromBase64url = (text: string): Uint8Array<ArrayBuffer> | undefined => {
  const rest = text.length % 4
  if (rest === 1) return undefined
  const bytes = new Uint8Array(Math.floor((text.length * 3) / 4))
  let at = 0
  let i = 0
  for (; i + 3 < text.length; i += 4) {
    const a = valueAt(text, i), b = valueAt(text, i + 1), c = valueAt(text, i + 2), d = valueAt(text, i + 3)
    if ((a | b | c | d) < 0) return undefined
    const n = (a << 18) | (b << 12) | (c << 6) | d
    bytes[at++] = n >>> 16
    bytes[at++] = (n >>> 8) & 255
    bytes[at++] = n & 255
  }
  if (rest > 0) {
    const a = valueAt(text, i), b = valueAt(text, i + 1), c = rest === 3 ? valueAt(text, i + 2) : 0
    if ((a | b | c) < 0) return undefined
    if (rest === 2 ? (b & 15) !== 0 : (c & 3) !== 0) return undefined
    const n = (a << 18) | (b << 12) | (c << 6)
    bytes[at++] = n >>> 16
    if (rest === 3) bytes[at++] = (n >>> 8) & 255
  }
  return bytes
}

/** The codec in JavaScript, for every runtime. */
export const base64url: Base64url = { encode: toBase64url, decode: fromBase64url }

/** WebCrypto: wherever `globalThis.crypto.subtle` is (Node, Workers, Deno, browsers). */
export const webCrypto: Backend = {
  name: "webcrypto",
  base64url,
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

// the part of Node's `Buffer` used here
interface NodeBufferClass {
  from(bytes: ArrayBufferLike, byteOffset: number, length: number): { toString(encoding: "base64url"): string }
  from(text: string, encoding: "base64url"): Uint8Array & { toString(encoding: "base64url"): string }
}

/** base64url on Node's `Buffer` (native), as strict as the JavaScript codec. */
export const bufferBase64url = (Buffer: NodeBufferClass): Base64url => ({
  encode: (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64url"),
  decode: (text) => {
    const decoded = Buffer.from(text, "base64url")
    // Buffer skips characters outside the alphabet and ignores unused trailing bits: only the one
    // text of its bytes is taken
    return decoded.toString("base64url") === text ? new Uint8Array(decoded) : undefined
  }
})

/** Node's `crypto` module over the same interface, and a base64url codec (the JavaScript one unless given). */
export const nodeCrypto = (crypto: NodeCrypto, codec: Base64url = base64url): Backend => ({
  name: "node",
  base64url: codec,
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

/** A built-in module through `process.getBuiltinModule` (no import, so bundles for Workers are untouched). */
const builtinModule = <M>(id: string): M | undefined => {
  const process = (globalThis as {
    readonly process?: { readonly getBuiltinModule?: (id: string) => unknown }
  }).process
  return typeof process?.getBuiltinModule === "function" ? process.getBuiltinModule(id) as M | undefined : undefined
}

/**
 * Node's `crypto` module when the runtime hands it over without an import and it seals, opens and
 * signs a byte, else `undefined`.
 */
export const builtinNodeCrypto = (): NodeCrypto | undefined => {
  try {
    const crypto = builtinModule<Partial<NodeCrypto>>("node:crypto")
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

/** Node's `Buffer` when the runtime hands it over without an import, else `undefined`. */
export const builtinBuffer = (): NodeBufferClass | undefined => {
  try {
    const Buffer = builtinModule<{ readonly Buffer?: Partial<NodeBufferClass> }>("node:buffer")?.Buffer
    if (typeof Buffer?.from !== "function") return undefined
    const codec = bufferBase64url(Buffer as NodeBufferClass)
    // the round trip the codec relies on, checked once
    const probe = Uint8Array.from([0, 1, 254, 255])
    const text = codec.encode(probe)
    const back = codec.decode(text)
    return text === "AAH-_w" && back !== undefined && back.length === 4 && back[3] === 255 &&
        codec.decode("AAH-_x") === undefined
      ? Buffer as NodeBufferClass
      : undefined
  } catch {
    return undefined
  }
}

/** Node's module (and `Buffer`'s base64url) where there is one, else WebCrypto. */
export const preferred = (): Backend => {
  const crypto = builtinNodeCrypto()
  if (crypto === undefined) return webCrypto
  const Buffer = builtinBuffer()
  return nodeCrypto(crypto, Buffer === undefined ? base64url : bufferBase64url(Buffer))
}
