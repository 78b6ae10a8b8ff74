/**
 * Idempotency keys, bare or quoted, validated before anything touches a store (README.md#keys-and-fingerprints).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Sha256 from "./base/sha256.js"
import { InvalidIdempotencyKey } from "./IdempotencyError.js"

/**
 * The default maximum length of a key, in characters.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_LENGTH = 255

/**
 * How many characters of a rejected input an error may show.
 *
 * @since 0.1.0
 * @category constants
 */
export const PREVIEW_LENGTH = 12

/**
 * The separator of the components of a stored record id. Keys never contain it.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEPARATOR = "#"

/**
 * Options of key validation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** 1 to 1024. Default 255. */
  readonly maxLength?: number | undefined
}

const BrandedString = Schema.String.pipe(Schema.brand("IdempotencyKey"))

/**
 * A validated idempotency key.
 *
 * @since 0.1.0
 * @category models
 */
export type IdempotencyKey = typeof BrandedString.Type

const isAllowed = (code: number): boolean =>
  code >= 0x21 && code <= 0x7e && code !== 0x22 /* " */ && code !== 0x5c /* \ */ && code !== 0x23 /* # */

const escapeChar = (char: string): string => {
  const code = char.charCodeAt(0)
  if (code >= 0x20 && code <= 0x7e) return char
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
}

/**
 * A short, escaped prefix of an input, safe to put in logs and error messages.
 *
 * @since 0.1.0
 * @category utils
 */
export const preview = (input: string): string => {
  const head = Array.from(input.slice(0, PREVIEW_LENGTH), escapeChar).join("")
  return input.length > PREVIEW_LENGTH ? `"${head}…"` : `"${head}"`
}

/**
 * The key as logs and spans show it: the first 16 hexadecimal digits of its SHA-256.
 *
 * @since 0.1.0
 * @category utils
 */
export const hash = (key: string): string => Sha256.hex(Sha256.digestUtf8(key)).slice(0, 16)

const resolveMaxLength = (options: Options | undefined): number => {
  const max = options?.maxLength ?? DEFAULT_MAX_LENGTH
  return Number.isInteger(max) && max >= 1 && max <= 1024 ? max : DEFAULT_MAX_LENGTH
}

/**
 * Validates an input and returns the bare key, or the rule it broke.
 *
 * @since 0.1.0
 * @category decoding
 */
export const validate = (input: unknown, options?: Options): Either.Either<IdempotencyKey, InvalidIdempotencyKey> => {
  const maxLength = resolveMaxLength(options)
  if (typeof input !== "string") {
    return Either.left(new InvalidIdempotencyKey({ reason: "NotAString", length: 0, maxLength, preview: "" }))
  }
  const fail = (reason: InvalidIdempotencyKey["reason"], position?: number) =>
    Either.left(
      new InvalidIdempotencyKey({
        reason,
        length: input.length,
        maxLength,
        preview: preview(input),
        ...(position === undefined ? {} : { position })
      })
    )
  let start = 0
  let end = input.length
  if (input.charCodeAt(0) === 0x22) {
    // the sf-string form: "…"; since `"` and `\` are not allowed inside a key, no escapes are needed
    if (input.length < 2 || input.charCodeAt(input.length - 1) !== 0x22) {
      return fail("UnterminatedQuote", input.length)
    }
    start = 1
    end = input.length - 1
  }
  const length = end - start
  if (length === 0) return fail("Empty")
  for (let i = start; i < end; i++) {
    if (i - start >= maxLength) return fail("TooLong", i)
    if (!isAllowed(input.charCodeAt(i))) return fail("InvalidCharacter", i)
  }
  return Either.right((start === 0 ? input : input.slice(start, end)) as IdempotencyKey)
}

/**
 * Decodes an input (bare or quoted) into a key.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = (input: unknown, options?: Options): Effect.Effect<IdempotencyKey, InvalidIdempotencyKey> =>
  validate(input, options)

/**
 * A schema from a string (bare or quoted) to a validated key, with custom options.
 *
 * @since 0.1.0
 * @category schemas
 */
export const schema = (options?: Options): Schema.Schema<IdempotencyKey, string> =>
  Schema.transformOrFail(Schema.String, BrandedString, {
    strict: true,
    decode: (input, _, ast) =>
      Either.mapLeft(validate(input, options), (error) => new ParseResult.Type(ast, input, error.message)),
    encode: ParseResult.succeed
  }).annotations({ identifier: "IdempotencyKey" })

/**
 * The schema of a key with the default rules.
 *
 * @since 0.1.0
 * @category schemas
 */
export const IdempotencyKey: Schema.Schema<IdempotencyKey, string> = schema()

/**
 * Builds a key, throwing `InvalidIdempotencyKey` if it is not valid: for constants and tests.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake = (input: string, options?: Options): IdempotencyKey =>
  Either.getOrThrowWith(validate(input, options), (error) => error)

/**
 * A random (UUID v4) key, for system-triggered events that carry no client key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const generate: Effect.Effect<IdempotencyKey> = Effect.sync(() =>
  globalThis.crypto.randomUUID() as IdempotencyKey
)
