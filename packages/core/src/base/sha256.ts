// SHA-256 (FIPS 180-4) without platform modules; fingerprints, record ids and step keys depend on it byte for byte (test/StableFormats.test.ts).

const K = new Int32Array([
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2
])

// every call runs to its end before another starts: the buffers below are shared, nothing is allocated but the result

const W = new Int32Array(64)
const H = new Int32Array(8)
let buffer = new Uint8Array(1024)

/** A lone surrogate is written as U+FFFD. */
const writeUtf8 = (text: string, offset: number): number => {
  let out = offset
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i)
    if (code < 0x80) {
      buffer[out++] = code
    } else if (code < 0x800) {
      buffer[out++] = 0xc0 | (code >>> 6)
      buffer[out++] = 0x80 | (code & 0x3f)
    } else {
      if (code >= 0xd800 && code <= 0xdfff) {
        const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0
        if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00)
          i++
          buffer[out++] = 0xf0 | (code >>> 18)
          buffer[out++] = 0x80 | ((code >>> 12) & 0x3f)
          buffer[out++] = 0x80 | ((code >>> 6) & 0x3f)
          buffer[out++] = 0x80 | (code & 0x3f)
          continue
        }
        code = 0xfffd
      }
      buffer[out++] = 0xe0 | (code >>> 12)
      buffer[out++] = 0x80 | ((code >>> 6) & 0x3f)
      buffer[out++] = 0x80 | (code & 0x3f)
    }
  }
  return out
}

const compress = (blocks: number): void => {
  let h0 = H[0]!, h1 = H[1]!, h2 = H[2]!, h3 = H[3]!, h4 = H[4]!, h5 = H[5]!, h6 = H[6]!, h7 = H[7]!
  for (let block = 0; block < blocks; block++) {
    const base = block << 6
    for (let t = 0; t < 16; t++) {
      const i = base + (t << 2)
      W[t] = (buffer[i]! << 24) | (buffer[i + 1]! << 16) | (buffer[i + 2]! << 8) | buffer[i + 3]!
    }
    for (let t = 16; t < 64; t++) {
      const w15 = W[t - 15]!
      const w2 = W[t - 2]!
      const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3)
      const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10)
      W[t] = (W[t - 16]! + s0 + W[t - 7]! + s1) | 0
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))
      const ch = (e & f) ^ (~e & g)
      const t1 = (h + S1 + ch + K[t]! + W[t]!) | 0
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))
      const maj = (a & b) ^ (a & c) ^ (b & c)
      h = g
      g = f
      f = e
      e = (d + t1) | 0
      d = c
      c = b
      b = a
      a = (t1 + S0 + maj) | 0
    }
    h0 = (h0 + a) | 0
    h1 = (h1 + b) | 0
    h2 = (h2 + c) | 0
    h3 = (h3 + d) | 0
    h4 = (h4 + e) | 0
    h5 = (h5 + f) | 0
    h6 = (h6 + g) | 0
    h7 = (h7 + h) | 0
  }
  H[0] = h0
  H[1] = h1
  H[2] = h2
  H[3] = h3
  H[4] = h4
  H[5] = h5
  H[6] = h6
  H[7] = h7
}

/**
 * The SHA-256 digest of the UTF-8 encoding of strings, one after the other, as if they were one.
 *
 * @internal
 */
export const digestUtf8 = (...parts: ReadonlyArray<string>): Uint8Array => {
  // at most 3 bytes per UTF-16 unit, then 0x80, zero padding and the 8-byte bit length
  let most = 72
  for (const part of parts) most += part.length * 3
  if (buffer.length < most) buffer = new Uint8Array(Math.max(most, buffer.length * 2))
  let length = 0
  for (const part of parts) length = writeUtf8(part, length)
  const blocks = (length + 72) >>> 6
  const end = blocks << 6
  buffer[length] = 0x80
  buffer.fill(0, length + 1, end - 8)
  const high = Math.floor(length / 0x20000000)
  const low = (length << 3) >>> 0
  buffer[end - 8] = high >>> 24
  buffer[end - 7] = (high >>> 16) & 0xff
  buffer[end - 6] = (high >>> 8) & 0xff
  buffer[end - 5] = high & 0xff
  buffer[end - 4] = low >>> 24
  buffer[end - 3] = (low >>> 16) & 0xff
  buffer[end - 2] = (low >>> 8) & 0xff
  buffer[end - 1] = low & 0xff
  H[0] = 0x6a09e667
  H[1] = 0xbb67ae85 | 0
  H[2] = 0x3c6ef372
  H[3] = 0xa54ff53a | 0
  H[4] = 0x510e527f
  H[5] = 0x9b05688c | 0
  H[6] = 0x1f83d9ab
  H[7] = 0x5be0cd19
  compress(blocks)
  const out = new Uint8Array(32)
  for (let i = 0; i < 8; i++) {
    const word = H[i]!
    out[i << 2] = word >>> 24
    out[(i << 2) + 1] = (word >>> 16) & 0xff
    out[(i << 2) + 2] = (word >>> 8) & 0xff
    out[(i << 2) + 3] = word & 0xff
  }
  return out
}

const HEX_DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0))

const BASE64URL = Array.from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", (c) => c.charCodeAt(0))

// made at once, one flat string (a tree of concatenations would take 1.3 KB instead of 88 bytes in a record)
const text = (codes: Array<number>): string => String.fromCharCode.apply(null, codes)

/** @internal */
export const hex = (bytes: Uint8Array, prefix = ""): string => {
  const codes = new Array<number>(prefix.length + bytes.length * 2)
  for (let i = 0; i < prefix.length; i++) codes[i] = prefix.charCodeAt(i)
  let at = prefix.length
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!
    codes[at++] = HEX_DIGITS[byte >>> 4]!
    codes[at++] = HEX_DIGITS[byte & 15]!
  }
  return text(codes)
}

/**
 * Base64url without padding (RFC 4648 section 5).
 *
 * @internal
 */
export const base64url = (bytes: Uint8Array): string => {
  const codes = new Array<number>(Math.ceil((bytes.length * 4) / 3))
  let at = 0
  let i = 0
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    codes[at++] = BASE64URL[n >>> 18]!
    codes[at++] = BASE64URL[(n >>> 12) & 63]!
    codes[at++] = BASE64URL[(n >>> 6) & 63]!
    codes[at++] = BASE64URL[n & 63]!
  }
  const rest = bytes.length - i
  if (rest > 0) {
    const n = (bytes[i]! << 16) | (rest === 2 ? bytes[i + 1]! << 8 : 0)
    codes[at++] = BASE64URL[n >>> 18]!
    codes[at++] = BASE64URL[(n >>> 12) & 63]!
    if (rest === 2) codes[at++] = BASE64URL[(n >>> 6) & 63]!
  }
  return text(codes)
}
