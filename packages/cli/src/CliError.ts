/**
 * The failures of the CLI's own making: a store it cannot name, and a key with no record.
 *
 * Every other failure of a command is the library's (`InvalidIdempotencyKey`, `UnblockRefused`,
 * `StoreUnavailable`, `StoreError`, …); `ExitCode.ofError` maps them all to an exit code.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The store to act on is not named, or not in a form the CLI knows: `--store` is not a URL of a
 * supported scheme, a DynamoDB store has no region, the table name or key prefix is invalid, a
 * `sqlite:` store's driver (`@effect/sql-sqlite-node`) is not installed, or the environment names
 * more than one store. Nothing was sent to any store. The message never holds the URL itself (it may
 * carry a password).
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
