/**
 * What the stores' layers share.
 *
 * @internal
 */
import { IdempotencyError } from "@effect-idempotency/core"

/** The name the CLI's connections carry on the server (`application_name`, `CLIENT SETNAME`). */
export const connectionName = "effect-idempotency-cli"

/** A connection that could not be made: the store is unavailable. */
export const unavailable = (cause: unknown) => new IdempotencyError.StoreUnavailable({ method: "connect", cause })
