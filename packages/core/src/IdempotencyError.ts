/**
 * The typed failures of an idempotent operation and of an `IdempotencyStore`.
 *
 * Every error is a `Schema.TaggedError`, so it can be matched with `Effect.catchTag`, serialized,
 * and mapped to an HTTP status (see `IdempotencyError.httpStatus`).
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

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
 * `preview` holds at most a short, escaped prefix of the input, never the whole value.
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
  override get message(): string {
    return `Idempotency key was already used for operation "${this.operation}" with a different request`
  }
}

/**
 * The downstream call did not finish within the operation's timeout, so its outcome is unknown.
 * The operation's timeout policy was applied (`policy`). `replayed` is `true` when a later attempt
 * finds a record that the `markUnknown` policy (or a crash under it) left behind.
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
  replayed: Schema.Boolean
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.replayed
      ? `Operation "${this.operation}": an earlier attempt's outcome is unknown; the key is blocked until it expires`
      : `Operation "${this.operation}" timed out after ${this.timeoutMillis} ms; policy "${this.policy}" applied`
  }
}

/**
 * The attempt no longer holds the reservation: its fencing token was superseded (another attempt
 * took the record over after the lease ended) or the record is gone.
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends Schema.TaggedError<LeaseLost>("@effect-idempotency/core/LeaseLost")("LeaseLost", {
  method: Schema.Literal("complete", "release", "markFailed", "extend"),
  recordId: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Lease lost on ${this.method}: the reservation of ${this.recordId} is held by another attempt or gone`
  }
}

/**
 * The store could not be reached (connection refused or dropped, throttled past its retries).
 * The downstream was not called if this happened before the reservation.
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
  override get message(): string {
    return `Idempotency store unavailable during ${this.method}`
  }
}

/**
 * The store failed for a reason other than connectivity (a malformed table, a rejected statement).
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
 * The failure or timeout policy could not be applied because the store failed. `original` is the
 * failure the policy was applied for; the lease still bounds how long the key stays blocked.
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
  override get message(): string {
    return `Operation "${this.operation}": policy "${this.policy}" could not be recorded; the lease bounds the block`
  }
}

/**
 * A stored outcome no longer decodes with the operation's schemas (for example after a deploy
 * changed them).
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
  override get message(): string {
    return `Operation "${this.operation}": the stored outcome does not decode with the current schemas`
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

const tags: ReadonlySet<string> = new Set([
  "InvalidIdempotencyKey",
  "IdempotencyConflict",
  "KeyReused",
  "DownstreamTimeout",
  "LeaseLost",
  "CleanupFailed",
  "StoreUnavailable",
  "StoreError",
  "StoredOutcomeInvalid"
])

/**
 * Whether a value is one of this library's errors (and not a domain failure).
 *
 * @since 0.1.0
 * @category refinements
 */
export const isIdempotencyError = (u: unknown): u is IdempotencyError =>
  Predicate.hasProperty(u, "_tag") && typeof u._tag === "string" && tags.has(u._tag) && u instanceof Error

/**
 * Node.js socket and DNS error codes (an error's `code`) that mean a store's server could not be
 * reached or the connection to it was lost. A store maps a failure with one of them to
 * `StoreUnavailable`; for store authors.
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
  u instanceof StoreUnavailable || u instanceof StoreError

/**
 * The HTTP status an error maps to, following the IETF Idempotency-Key draft where it says so.
 *
 * | error | status |
 * | --- | --- |
 * | `InvalidIdempotencyKey` | 400 |
 * | `IdempotencyConflict`, `LeaseLost` | 409 |
 * | `KeyReused` | 422 |
 * | `StoredOutcomeInvalid` | 500 |
 * | `CleanupFailed`, `StoreUnavailable`, `StoreError` | 503 |
 * | `DownstreamTimeout` | 504 |
 *
 * @since 0.1.0
 * @category mapping
 */
export const httpStatus = (error: IdempotencyError): number => {
  switch (error._tag) {
    case "InvalidIdempotencyKey":
      return 400
    case "IdempotencyConflict":
    case "LeaseLost":
      return 409
    case "KeyReused":
      return 422
    case "StoredOutcomeInvalid":
      return 500
    case "CleanupFailed":
    case "StoreUnavailable":
    case "StoreError":
      return 503
    case "DownstreamTimeout":
      return 504
  }
}
