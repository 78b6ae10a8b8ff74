/**
 * Request fingerprints: a canonical hash of the schema-encoded payload, so a key reused with a
 * different request is detected (`KeyReused`) instead of silently replaying the old outcome.
 *
 * The canonical form sorts object keys, keeps array order, drops `undefined` object members (as
 * JSON does) and respects `toJSON`. The hash is tagged with its algorithm: `sha256:<hex>`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Sha256 from "./internal/sha256.js"

/**
 * A fingerprint string, `<algorithm>:<hex digest>`.
 *
 * @since 0.1.0
 * @category models
 */
export type Fingerprint = string

/**
 * The algorithm tag of fingerprints made by this module.
 *
 * @since 0.1.0
 * @category constants
 */
export const ALGORITHM = "sha256"

const PREFIX = `${ALGORITHM}:`

/** The longest list of keys sorted in place by insertion; a longer one goes to `Array.prototype.sort`. */
const INSERTION_SORT_MAX = 16

/**
 * The own enumerable keys of `record`, in code-unit order (the order of `Array.prototype.sort`).
 * The few keys of a typical payload are sorted by insertion, which allocates nothing, where the
 * engine's sort allocates a work area per call.
 */
const sortedKeys = (record: Record<string, unknown>): Array<string> => {
  const keys = Object.keys(record)
  if (keys.length > INSERTION_SORT_MAX) return keys.sort()
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!
    let j = i - 1
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!
      j--
    }
    keys[j + 1] = key
  }
  return keys
}

/** The canonical text of `value` (see `canonicalJson`), built by concatenation. */
const write = (value: unknown): string => {
  if (value === null) return "null"
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : "null"
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      return JSON.stringify(value.toString())
    case "undefined":
    case "function":
    case "symbol":
      return "null"
  }
  const withJson = value as { toJSON?: unknown }
  if (typeof withJson.toJSON === "function") return write((withJson.toJSON as () => unknown)())
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ","
      out += write(value[i])
    }
    return out + "]"
  }
  const record = value as Record<string, unknown>
  const keys = sortedKeys(record)
  let out = "{"
  let first = true
  for (let i = 0; i < keys.length; i++) {
    const member = record[keys[i]!]
    if (member === undefined) continue
    out += (first ? "" : ",") + JSON.stringify(keys[i]) + ":" + write(member)
    first = false
  }
  return out + "}"
}

/**
 * The canonical JSON text of a value: object keys sorted at every depth.
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalJson = (value: unknown): string => write(value)

/**
 * The fingerprint of an already-encoded (JSON-like) value.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncoded = (encoded: unknown): Fingerprint => Sha256.hex(Sha256.digestUtf8(write(encoded)), PREFIX)

/**
 * The fingerprint of a payload, computed over its encoding with `schema`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, I>(schema: Schema.Schema<A, I>) => {
  const encode = Schema.encode(schema)
  return (payload: A): Effect.Effect<Fingerprint, ParseResult.ParseError> => Effect.map(encode(payload), fromEncoded)
}
