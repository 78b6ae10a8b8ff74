/**
 * The failures of the CLI's own making; `ExitCode.ofError` maps every failure to an exit code.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The store to act on is not named, or not in a form the CLI knows; its message never holds the URL.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidStore extends Schema.TaggedError<InvalidStore>("@effect-idempotency/cli/InvalidStore")(
  "InvalidStore",
  { reason: Schema.String }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid store: ${this.reason}`
  }
}

/**
 * `inspect` found no record for the key (never written, expired, purged or unblocked).
 *
 * @since 0.1.0
 * @category errors
 */
export class RecordNotFound extends Schema.TaggedError<RecordNotFound>("@effect-idempotency/cli/RecordNotFound")(
  "RecordNotFound",
  { operation: Schema.String, keyHash: Schema.String }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `No record of ${this.operation} for the key (key hash ${this.keyHash})`
  }
}
