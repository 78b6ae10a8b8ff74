/**
 * The exit codes of `effect-idempotency`, stable across releases (README.md#exit-codes), and the
 * failure each command's error maps to.
 *
 * @example
 * ```ts
 * import { ExitCode } from "@effect-idempotency/cli"
 * import { IdempotencyAdmin } from "@effect-idempotency/core"
 *
 * const refused = new IdempotencyAdmin.UnblockRefused({ operation: "create-order", keyHash: "0123", reason: "changed" })
 * console.log(ExitCode.ofError(refused)) // 2
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyAdmin, IdempotencyError } from "@effect-idempotency/core"
import * as ValidationError from "@effect/cli/ValidationError"
import * as ConfigError from "effect/ConfigError"
import { InvalidStore, RecordNotFound } from "./CliError.js"

/**
 * The command did what it was asked.
 *
 * @since 0.1.0
 * @category constants
 */
export const Ok = 0

/**
 * The command line is not valid, or names an invalid key, duration, store URL or table: nothing was
 * sent to the store.
 *
 * @since 0.1.0
 * @category constants
 */
export const Usage = 1

/**
 * `unblock` was refused: the record is absent, was taken over since the operator saw it, is still
 * running, or holds an outcome.
 *
 * @since 0.1.0
 * @category constants
 */
export const Refused = 2

/**
 * The store could not be reached in time.
 *
 * @since 0.1.0
 * @category constants
 */
export const StoreUnavailable = 3

/**
 * `inspect` found no record for the key.
 *
 * @since 0.1.0
 * @category constants
 */
export const NotFound = 4

/**
 * The store answered with a failure, or keeps no admin primitives.
 *
 * @since 0.1.0
 * @category constants
 */
export const StoreError = 5

/**
 * A defect of the CLI itself.
 *
 * @since 0.1.0
 * @category constants
 */
export const Internal = 70

/**
 * The exit code of a command's failure; `Internal` for anything the CLI does not expect.
 *
 * @since 0.1.0
 * @category utils
 */
export const ofError = (error: unknown): number => {
  if (
    ValidationError.isValidationError(error) || error instanceof InvalidStore ||
    error instanceof IdempotencyError.InvalidIdempotencyKey || error instanceof IdempotencyAdmin.InvalidTarget ||
    ConfigError.isConfigError(error)
  ) return Usage
  if (error instanceof IdempotencyAdmin.UnblockRefused) return Refused
  if (error instanceof IdempotencyError.StoreUnavailable) return StoreUnavailable
  if (error instanceof RecordNotFound) return NotFound
  if (error instanceof IdempotencyError.StoreError || error instanceof IdempotencyAdmin.AdminUnsupported) {
    return StoreError
  }
  return Internal
}
