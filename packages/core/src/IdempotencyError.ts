/**
 * The typed failures of an idempotent operation and of an `IdempotencyStore` (README.md#errors).
 *
 * @since 0.1.0
 */
import type * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

/**
 * The type id every error of this library carries, registered with `Symbol.for` (README.md#errors).
 *
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-idempotency/core/IdempotencyError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * The rule an idempotency key broke.
 *
 * @since 0.1.0
 * @category models
 */
export const InvalidKeyReason = Schema.Literal(
  "NotAString",
  "Empty",
  "TooLong",
  "InvalidCharacter",
  "UnterminatedQuote"
)

/**
 * @since 0.1.0
 * @category models
 */
export type InvalidKeyReason = typeof InvalidKeyReason.Type

/**
 * A client-supplied idempotency key failed validation. No store was touched.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidIdempotencyKey extends Schema.TaggedError<InvalidIdempotencyKey>(
  "@effect-idempotency/core/InvalidIdempotencyKey"
)("InvalidIdempotencyKey", {
  reason: InvalidKeyReason,
  position: Schema.optional(Schema.Number),
  length: Schema.Number,
  maxLength: Schema.Number,
  preview: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const at = this.position === undefined ? "" : ` at position ${this.position}`
    switch (this.reason) {
      case "NotAString":
        return "Invalid idempotency key: not a string"
      case "Empty":
        return "Invalid idempotency key: empty"
      case "TooLong":
        return `Invalid idempotency key: ${this.length} characters, at most ${this.maxLength} allowed (${this.preview})`
      case "InvalidCharacter":
        return `Invalid idempotency key: character not allowed${at} (${this.preview})`
      case "UnterminatedQuote":
        return `Invalid idempotency key: unterminated quoted string${at} (${this.preview})`
    }
  }
}

/**
 * Another attempt holds a live lease on the same key. Retry after `retryAfterMillis`.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>(
  "@effect-idempotency/core/IdempotencyConflict"
)("IdempotencyConflict", {
  operation: Schema.String,
  key: Schema.String,
  retryAfterMillis: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Operation "${this.operation}" is already in progress for this key; retry after ${this.retryAfterMillis} ms`
  }
}

/**
 * The key was used before with a request whose fingerprint differs.
 *
 * @since 0.1.0
 * @category errors
 */
export class KeyReused extends Schema.TaggedError<KeyReused>("@effect-idempotency/core/KeyReused")("KeyReused", {
  operation: Schema.String,
  key: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Idempotency key was already used for operation "${this.operation}" with a different request`
  }
}

/**
 * The downstream's time is up and its outcome is unknown; the timeout policy was applied.
 *
 * @since 0.1.0
 * @category errors
 */
export class DownstreamTimeout extends Schema.TaggedError<DownstreamTimeout>(
  "@effect-idempotency/core/DownstreamTimeout"
)("DownstreamTimeout", {
  operation: Schema.String,
  key: Schema.String,
  timeoutMillis: Schema.Number,
  policy: Schema.Literal("keepLease", "release", "markUnknown"),
  replayed: Schema.Boolean,
  rolledBack: Schema.optional(Schema.Boolean)
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.replayed
      ? `Operation "${this.operation}": an earlier attempt's outcome is unknown; the key is blocked until it expires`
      : this.rolledBack === true
      ? `Operation "${this.operation}" timed out after ${this.timeoutMillis} ms; its transaction was rolled back: nothing was written`
      : `Operation "${this.operation}" timed out after ${this.timeoutMillis} ms; policy "${this.policy}" applied`
  }
}

/**
 * The attempt no longer holds the reservation (`superseded`), or cannot keep it (`expiring`).
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends Schema.TaggedError<LeaseLost>("@effect-idempotency/core/LeaseLost")("LeaseLost", {
  method: Schema.Literal("complete", "release", "markFailed", "extend"),
  recordId: Schema.String,
  reason: Schema.optional(Schema.Literal("superseded", "expiring"))
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason === "expiring"
      ? `Lease of ${this.recordId} could not be extended before it ran out; the downstream was interrupted`
      : `Lease lost on ${this.method}: the reservation of ${this.recordId} is held by another attempt or gone`
  }
}

/**
 * The store could not be reached; before the reservation, the downstream was not called.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>(
  "@effect-idempotency/core/StoreUnavailable"
)("StoreUnavailable", {
  method: Schema.String,
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Idempotency store unavailable during ${this.method}`
  }
}

/**
 * The store failed for a reason other than connectivity.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreError extends Schema.TaggedError<StoreError>("@effect-idempotency/core/StoreError")("StoreError", {
  method: Schema.String,
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Idempotency store failed during ${this.method}`
  }
}

/**
 * Any failure of a store call.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreFailure = StoreUnavailable | StoreError

/**
 * The failure or timeout policy could not be applied because the store failed.
 *
 * @since 0.1.0
 * @category errors
 */
export class CleanupFailed extends Schema.TaggedError<CleanupFailed>("@effect-idempotency/core/CleanupFailed")(
  "CleanupFailed",
  {
    operation: Schema.String,
    key: Schema.String,
    policy: Schema.Literal("release", "store", "markFailed", "keepLease", "markUnknown"),
    original: Schema.Unknown,
    cause: Schema.Defect
  }
) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Operation "${this.operation}": policy "${this.policy}" could not be recorded; the lease bounds the block`
  }
}

/**
 * A stored outcome no longer decodes with the operation's schemas.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoredOutcomeInvalid extends Schema.TaggedError<StoredOutcomeInvalid>(
  "@effect-idempotency/core/StoredOutcomeInvalid"
)("StoredOutcomeInvalid", {
  operation: Schema.String,
  key: Schema.String,
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Operation "${this.operation}": the stored outcome does not decode with the current schemas`
  }
}

/**
 * The downstream ran, but its outcome does not encode or is too large to keep (README.md#errors).
 *
 * @since 0.1.0
 * @category errors
 */
export class OutcomeNotReplayable extends Schema.TaggedError<OutcomeNotReplayable>(
  "@effect-idempotency/core/OutcomeNotReplayable"
)("OutcomeNotReplayable", {
  operation: Schema.String,
  key: Schema.String,
  reason: Schema.String,
  replayed: Schema.Boolean
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Operation "${this.operation}" ran, but its outcome cannot be replayed: ${this.reason}`
  }
}

/**
 * The payload does not encode with the operation's payload schema. No store was touched.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>("@effect-idempotency/core/InvalidPayload")(
  "InvalidPayload",
  {
    operation: Schema.String,
    detail: Schema.String
  }
) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid payload for operation "${this.operation}": ${this.detail}`
  }
}

/**
 * A setting of an operation, or of one call, that no attempt can honour (README.md#errors).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSettings extends Schema.TaggedError<InvalidSettings>("@effect-idempotency/core/InvalidSettings")(
  "InvalidSettings",
  {
    operation: Schema.String,
    setting: Schema.String,
    reason: Schema.String
  }
) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid setting "${this.setting}" of operation "${this.operation}": ${this.reason}`
  }
}

/**
 * Every error an idempotent operation adds to the downstream effect's own errors.
 *
 * @since 0.1.0
 * @category models
 */
export type IdempotencyError =
  | InvalidIdempotencyKey
  | IdempotencyConflict
  | KeyReused
  | DownstreamTimeout
  | LeaseLost
  | CleanupFailed
  | StoreUnavailable
  | StoreError
  | StoredOutcomeInvalid
  | OutcomeNotReplayable
  | InvalidPayload
  | InvalidSettings

for (
  const error of [
    InvalidIdempotencyKey,
    IdempotencyConflict,
    KeyReused,
    DownstreamTimeout,
    LeaseLost,
    StoreUnavailable,
    StoreError,
    CleanupFailed,
    StoredOutcomeInvalid,
    OutcomeNotReplayable,
    InvalidPayload,
    InvalidSettings
  ]
) {
  Object.defineProperty(error.prototype, TypeId, { value: TypeId })
}

/**
 * Whether a value is one of this library's errors, by type id.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isIdempotencyError = (u: unknown): u is IdempotencyError =>
  Predicate.hasProperty(u, TypeId) && Predicate.hasProperty(u, "_tag") && typeof u._tag === "string"

/**
 * Whether a value is a `LeaseLost` of this library (from any installed copy of it).
 *
 * @since 0.1.0
 * @category refinements
 */
export const isLeaseLost = (u: unknown): u is LeaseLost => isIdempotencyError(u) && u._tag === "LeaseLost"

/**
 * Node.js socket and DNS error codes that a store maps to `StoreUnavailable`.
 *
 * @since 0.1.0
 * @category utils
 */
export const networkErrorCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL",
  "ERR_SOCKET_CONNECTION_TIMEOUT"
])

/**
 * Whether a value is a store failure (`StoreUnavailable` or `StoreError`).
 *
 * @since 0.1.0
 * @category refinements
 */
export const isStoreFailure = (u: unknown): u is StoreFailure =>
  isIdempotencyError(u) && (u._tag === "StoreUnavailable" || u._tag === "StoreError")

/**
 * The HTTP status an error maps to (the table in README.md#errors).
 *
 * @since 0.1.0
 * @category mapping
 */
export const httpStatus = (error: IdempotencyError): number => {
  switch (error._tag) {
    case "InvalidIdempotencyKey":
    case "InvalidPayload":
      return 400
    case "IdempotencyConflict":
    case "LeaseLost":
      return 409
    case "KeyReused":
      return 422
    case "StoredOutcomeInvalid":
    case "OutcomeNotReplayable":
    case "InvalidSettings":
      return 500
    case "CleanupFailed":
    case "StoreUnavailable":
    case "StoreError":
      return 503
    case "DownstreamTimeout":
      return 504
  }
}

const escapeText = (text: string, max: number): string => {
  let out = ""
  for (const char of text.slice(0, max)) {
    const code = char.charCodeAt(0)
    out += code >= 0x20 && code <= 0x7e && char !== "\"" && char !== "\\"
      ? char
      : code <= 0xff
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`
  }
  return text.length > max ? `${out}…` : out
}

const MAX_ISSUE_DEPTH = 64
const MAX_ISSUES = 3
const MAX_KEY_LENGTH = 24
const MAX_EXPECTED_LENGTH = 40

const issueKind = (issue: ParseResult.ParseIssue): string | undefined => {
  switch (issue._tag) {
    case "Type":
      return `expected ${escapeText(String(issue.ast), MAX_EXPECTED_LENGTH)}`
    case "Missing":
      return "missing"
    case "Unexpected":
      return "not allowed"
    case "Forbidden":
      return "cannot be checked"
    default:
      return undefined
  }
}

/**
 * Where a value broke a schema, safe to log: at most three paths, escaped, never the value's
 * contents; read iteratively, to a bounded depth.
 *
 * @since 0.1.0
 * @category utils
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const found: Array<string> = []
  const stack: Array<{ readonly issue: ParseResult.ParseIssue; readonly path: string; readonly depth: number }> = [
    { issue: error.issue, path: "", depth: 0 }
  ]
  let truncated = false
  while (stack.length > 0) {
    const { depth, issue, path } = stack.pop()!
    if (found.length >= MAX_ISSUES) {
      truncated = true
      break
    }
    if (depth > MAX_ISSUE_DEPTH) {
      found.push(`${path === "" ? "the value" : path}: nested too deeply`)
      continue
    }
    const kind = issueKind(issue)
    if (kind !== undefined) {
      found.push(`${path === "" ? "the value" : path}: ${kind}`)
      continue
    }
    switch (issue._tag) {
      case "Pointer": {
        const keys: ReadonlyArray<PropertyKey> = Array.isArray(issue.path) ? issue.path : [issue.path as PropertyKey]
        const suffix = keys.map((key) =>
          typeof key === "number" ? `[${key}]` : `["${escapeText(String(key), MAX_KEY_LENGTH)}"]`
        ).join("")
        stack.push({ issue: issue.issue, path: path + suffix, depth: depth + 1 })
        break
      }
      case "Refinement":
      case "Transformation":
        if (issue._tag === "Refinement" && issue.kind === "Predicate") {
          found.push(
            `${path === "" ? "the value" : path}: expected ${escapeText(String(issue.ast), MAX_EXPECTED_LENGTH)}`
          )
        } else {
          stack.push({ issue: issue.issue, path, depth: depth + 1 })
        }
        break
      case "Composite": {
        const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues]
        for (let i = issues.length - 1; i >= 0; i--) stack.push({ issue: issues[i]!, path, depth: depth + 1 })
        break
      }
    }
  }
  if (found.length === 0) return "does not match the schema"
  return found.join("; ") + (truncated || stack.length > 0 ? "; …" : "")
}
