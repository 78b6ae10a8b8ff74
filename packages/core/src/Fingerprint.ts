/**
 * Request fingerprints: a canonical hash of the schema-encoded payload, so a key reused with a
 * different request is detected (`KeyReused`) instead of silently replaying the old outcome.
 *
 * The canonical form is JSON with object keys sorted at every depth and array order kept, as JSON
 * writes it: `undefined` members and symbol keys dropped, `toJSON` respected (a `Date` is its ISO
 * string), a class instance written as its own enumerable fields (state kept elsewhere, such as
 * `#private` fields, needs a `toJSON` or a payload schema), `-0` as `0`, and an `undefined` payload
 * as `null`. A value JSON would write as another value fails with a `ParseError` (in the engine,
 * `InvalidPayload`) instead of colliding with it: a non-finite number (JSON writes `null`), a bigint
 * (its decimal string), a function or a symbol (`null`), `undefined` in an array or from `toJSON`
 * (`null`), an invalid `Date` (`null`), and a `Map`, `Set`, `RegExp`, `Error`, binary data or boxed
 * primitive (`{}`, or its indices). A payload schema can encode them (`Schema.BigInt` to a string).
 * The hash is tagged with its algorithm: `sha256:<hex>`.
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

/**
 * What the canonical form expects where it met a value it cannot write distinctly. The AST only
 * names it: `describeParseError` and the `ParseError`'s message print the name, never the value.
 */
const expected = (name: string): AST.AST => new AST.UnknownKeyword({ [AST.IdentifierAnnotationId]: name })

const FINITE_NUMBER = expected("a finite number")
const NOT_BIGINT = expected("a JSON value, not a bigint")
const NOT_FUNCTION = expected("a JSON value, not a function")
const NOT_SYMBOL = expected("a JSON value, not a symbol")
const NOT_UNDEFINED = expected("a JSON value, not undefined")
const VALID_DATE = expected("a valid Date")

/**
 * The built-in prototypes whose instances keep their contents out of their own enumerable fields:
 * JSON writes them as `{}` (or their indices), whatever they hold. A subclass inherits its entry.
 */
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

/** The entry of `OPAQUE` on the prototype chain of `proto`, if any. */
const opaque = (proto: object): AST.AST | undefined => {
  for (let current: object | null = proto; current !== null; current = Object.getPrototypeOf(current)) {
    const found = OPAQUE.get(current)
    if (found !== undefined) return found
  }
  return undefined
}

/**
 * A value the canonical form cannot write distinctly, what it expected there, and the path to it:
 * innermost key first, as the writer returns through its containers.
 */
interface Unwritable {
  readonly expected: AST.AST
  readonly actual: unknown
  readonly path: Array<PropertyKey>
}

const unwritable = (expected: AST.AST, actual: unknown): Unwritable => ({ expected, actual, path: [] })

/**
 * The canonical text of `value` (see `canonicalJson`), built by concatenation, or the first value
 * in it that JSON would write as another value. Only the failure allocates a record.
 */
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

/** The most keys of a path the error names; a deeper one ends with `"..."`. */
const MAX_PATH_KEYS = 8

/** The `ParseError` of a value the canonical form cannot write, pointing at it. */
const parseError = (root: unknown, failure: Unwritable): ParseResult.ParseError => {
  const issue = new ParseResult.Type(failure.expected, failure.actual, `Expected ${String(failure.expected)}`)
  const path = failure.path.reverse()
  if (!Arr.isNonEmptyArray(path)) return new ParseResult.ParseError({ issue })
  const shown = path.length > MAX_PATH_KEYS ? Arr.append(path.slice(0, MAX_PATH_KEYS), "...") : path
  return new ParseResult.ParseError({ issue: new ParseResult.Pointer(shown, root, issue) })
}

/** The canonical text of a whole payload: `undefined` (no payload) is written as `null`. */
const canonical = (value: unknown): Either.Either<string, ParseResult.ParseError> => {
  if (value === undefined) return Either.right("null")
  const text = write(value)
  return typeof text === "string" ? Either.right(text) : Either.left(parseError(value, text))
}

/**
 * The canonical JSON text of a value: object keys sorted at every depth. Throws a `ParseError`
 * where the value holds something JSON would write as another value (see the module's
 * documentation).
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalJson = (value: unknown): string => Either.getOrThrowWith(canonical(value), identity)

/**
 * The fingerprint of an already-encoded (JSON-like) value, or a `ParseError` where the value holds
 * something JSON would write as another value (a non-finite number, a bigint, a `Map`, …).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncodedEither = (encoded: unknown): Either.Either<Fingerprint, ParseResult.ParseError> =>
  Either.map(canonical(encoded), (text) => Sha256.hex(Sha256.digestUtf8(text), PREFIX))

/**
 * The fingerprint of an already-encoded (JSON-like) value. Throws the `ParseError` of
 * `fromEncodedEither`.
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
