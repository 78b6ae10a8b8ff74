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

const write = (value: unknown, out: Array<string>): void => {
  if (value === null) {
    out.push("null")
    return
  }
  switch (typeof value) {
    case "string":
      out.push(JSON.stringify(value))
      return
    case "number":
      out.push(Number.isFinite(value) ? JSON.stringify(value) : "null")
      return
    case "boolean":
      out.push(value ? "true" : "false")
      return
    case "bigint":
      out.push(JSON.stringify(value.toString()))
      return
    case "undefined":
    case "function":
    case "symbol":
      out.push("null")
      return
  }
  const withJson = value as { toJSON?: unknown }
  if (typeof withJson.toJSON === "function") {
    write((withJson.toJSON as () => unknown)(), out)
    return
  }
  if (Array.isArray(value)) {
    out.push("[")
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(",")
      write(value[i], out)
    }
    out.push("]")
    return
  }
  const record = value as Record<string, unknown>
  const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort()
  out.push("{")
  for (let i = 0; i < keys.length; i++) {
    if (i > 0) out.push(",")
    out.push(JSON.stringify(keys[i]), ":")
    write(record[keys[i]!], out)
  }
  out.push("}")
}

/**
 * The canonical JSON text of a value: object keys sorted at every depth.
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalJson = (value: unknown): string => {
  const out: Array<string> = []
  write(value, out)
  return out.join("")
}

/**
 * The fingerprint of an already-encoded (JSON-like) value.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncoded = (encoded: unknown): Fingerprint =>
  `${ALGORITHM}:${Sha256.hex(Sha256.digestUtf8(canonicalJson(encoded)))}`

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
