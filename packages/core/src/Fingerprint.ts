/**
 * Request fingerprints: a hash of the encoded payload's canonical JSON (README.md#keys-and-fingerprints).
 *
 * @since 0.1.0
 */
import * as Arr from "effect/Array"
import type * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import * as Sha256 from "./base/sha256.js"

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

const INSERTION_SORT_MAX = 16

// sorted by insertion up to INSERTION_SORT_MAX keys: it allocates nothing, where the engine's sort allocates
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

// only names what was expected: messages print the name, never the value
const expected = (name: string): AST.AST => new AST.UnknownKeyword({ [AST.IdentifierAnnotationId]: name })

const FINITE_NUMBER = expected("a finite number")
const NOT_BIGINT = expected("a JSON value, not a bigint")
const NOT_FUNCTION = expected("a JSON value, not a function")
const NOT_SYMBOL = expected("a JSON value, not a symbol")
const NOT_UNDEFINED = expected("a JSON value, not undefined")
const VALID_DATE = expected("a valid Date")

// instances JSON writes as `{}` (or their indices), whatever they hold; a subclass inherits its entry
const OPAQUE: ReadonlyMap<object, AST.AST> = new Map<object, AST.AST>([
  [Map.prototype, expected("a plain object, not a Map")],
  [Set.prototype, expected("a plain object, not a Set")],
  [WeakMap.prototype, expected("a plain object, not a WeakMap")],
  [WeakSet.prototype, expected("a plain object, not a WeakSet")],
  [WeakRef.prototype, expected("a plain object, not a WeakRef")],
  [RegExp.prototype, expected("a plain object, not a RegExp")],
  [Error.prototype, expected("a plain object, not an Error")],
  [Promise.prototype, expected("a plain object, not a Promise")],
  [ArrayBuffer.prototype, expected("a plain object, not binary data")],
  ...(typeof SharedArrayBuffer === "function"
    ? [[SharedArrayBuffer.prototype, expected("a plain object, not binary data")] as const]
    : []),
  [Object.getPrototypeOf(Uint8Array.prototype) as object, expected("a plain object, not binary data")],
  [DataView.prototype, expected("a plain object, not binary data")],
  [Number.prototype, expected("a plain object, not a boxed number")],
  [String.prototype, expected("a plain object, not a boxed string")],
  [Boolean.prototype, expected("a plain object, not a boxed boolean")],
  [BigInt.prototype, expected("a plain object, not a boxed bigint")],
  [Symbol.prototype, expected("a plain object, not a boxed symbol")]
])

const opaque = (proto: object): AST.AST | undefined => {
  for (let current: object | null = proto; current !== null; current = Object.getPrototypeOf(current)) {
    const found = OPAQUE.get(current)
    if (found !== undefined) return found
  }
  return undefined
}

/** The path is innermost key first, as the writer returns through its containers. */
interface Unwritable {
  readonly expected: AST.AST
  readonly actual: unknown
  readonly path: Array<PropertyKey>
}

const unwritable = (expected: AST.AST, actual: unknown): Unwritable => ({ expected, actual, path: [] })

/** Built by concatenation; only the failure allocates a record. */
const write = (value: unknown): string | Unwritable => {
  if (value === null) return "null"
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : unwritable(FINITE_NUMBER, value)
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      return unwritable(NOT_BIGINT, value)
    case "undefined":
      return unwritable(NOT_UNDEFINED, value)
    case "function":
      return unwritable(NOT_FUNCTION, value)
    case "symbol":
      return unwritable(NOT_SYMBOL, value)
  }
  const withJson = value as { toJSON?: unknown }
  if (typeof withJson.toJSON === "function") {
    if (value instanceof Date && Number.isNaN(value.getTime())) return unwritable(VALID_DATE, value)
    return write((withJson.toJSON as () => unknown)())
  }
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ","
      const item = write(value[i])
      if (typeof item !== "string") {
        item.path.push(i)
        return item
      }
      out += item
    }
    return out + "]"
  }
  const proto: object | null = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) {
    const expected = opaque(proto)
    if (expected !== undefined) return unwritable(expected, value)
  }
  const record = value as Record<string, unknown>
  const keys = sortedKeys(record)
  let out = "{"
  let first = true
  for (let i = 0; i < keys.length; i++) {
    const member = record[keys[i]!]
    if (member === undefined) continue
    const text = write(member)
    if (typeof text !== "string") {
      text.path.push(keys[i]!)
      return text
    }
    out += (first ? "" : ",") + JSON.stringify(keys[i]) + ":" + text
    first = false
  }
  return out + "}"
}

const MAX_PATH_KEYS = 8

const parseError = (root: unknown, failure: Unwritable): ParseResult.ParseError => {
  const issue = new ParseResult.Type(failure.expected, failure.actual, `Expected ${String(failure.expected)}`)
  const path = failure.path.reverse()
  if (!Arr.isNonEmptyArray(path)) return new ParseResult.ParseError({ issue })
  const shown = path.length > MAX_PATH_KEYS ? Arr.append(path.slice(0, MAX_PATH_KEYS), "...") : path
  return new ParseResult.ParseError({ issue: new ParseResult.Pointer(shown, root, issue) })
}

const canonical = (value: unknown): Either.Either<string, ParseResult.ParseError> => {
  if (value === undefined) return Either.right("null")
  const text = write(value)
  return typeof text === "string" ? Either.right(text) : Either.left(parseError(value, text))
}

/**
 * The canonical JSON text of a value; throws a `ParseError` where JSON would write another value.
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalJson = (value: unknown): string => Either.getOrThrowWith(canonical(value), identity)

/**
 * The fingerprint of an already-encoded (JSON-like) value, or a `ParseError`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncodedEither = (encoded: unknown): Either.Either<Fingerprint, ParseResult.ParseError> =>
  Either.map(canonical(encoded), (text) => Sha256.hex(Sha256.digestUtf8(text), PREFIX))

/**
 * The fingerprint of an already-encoded value; throws the `ParseError` of `fromEncodedEither`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncoded = (encoded: unknown): Fingerprint =>
  Either.getOrThrowWith(fromEncodedEither(encoded), identity)

/**
 * The fingerprint of a payload, computed over its encoding with `schema`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, I>(schema: Schema.Schema<A, I>) => {
  const encode = Schema.encode(schema)
  return (payload: A): Effect.Effect<Fingerprint, ParseResult.ParseError> =>
    ParseResult.flatMap(encode(payload), fromEncodedEither)
}
