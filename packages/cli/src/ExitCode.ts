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
 * @since 0.1.0
 * @category constants
 */
export const Ok = 0

/**
 * @since 0.1.0
 * @category constants
 */
export const Usage = 1

/**
 * @since 0.1.0
 * @category constants
 */
export const Refused = 2

/**
 * @since 0.1.0
 * @category constants
 */
export const StoreUnavailable = 3

/**
 * @since 0.1.0
 * @category constants
 */
export const NotFound = 4

/**
 * @since 0.1.0
 * @category constants
 */
export const StoreError = 5

/**
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
