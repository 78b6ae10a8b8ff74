/**
 * What every store implements: the service's methods and the requests they take. The public names
 * are `IdempotencyStore`'s, which re-exports them; they live here, below it, so that the stores
 * built in this package (memory, cache) need nothing of the module that offers them as layers.
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { LeaseLost, StoreFailure } from "../IdempotencyError.js"
import type { IdempotencyRecord, RecordId, ReserveResult, StoredOutcome } from "../IdempotencyRecord.js"

/**
 * A reservation request.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReserveRequest {
  readonly id: RecordId
  /** The fencing token the caller will hold if the reservation succeeds. */
  readonly token: string
  readonly fingerprint: string
  /** How long the record blocks other attempts. */
  readonly lease: Duration.Duration
  /** How long the record lives (at least as long as the lease). */
  readonly ttl: Duration.Duration
  /**
   * Whether an IN_PROGRESS record whose lease ended may be taken over. `false` for at-most-once
   * operations: a crashed attempt's outcome is unknown, so its key stays blocked until it expires.
   */
  readonly takeover: boolean
}

/**
 * A token-checked write request.
 *
 * @since 0.1.0
 * @category models
 */
export interface TokenRequest {
  readonly id: RecordId
  readonly token: string
}

/**
 * Completion: the record becomes COMPLETED with `outcome`, and lives for `ttl` from now.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompleteRequest extends TokenRequest {
  readonly outcome: StoredOutcome
  readonly ttl: Duration.Duration
}

/**
 * Marking failed: the record becomes FAILED for `ttl` from now; a retry with the same
 * fingerprint takes it over.
 *
 * @since 0.1.0
 * @category models
 */
export interface MarkFailedRequest extends TokenRequest {
  readonly ttl: Duration.Duration
}

/**
 * Extending the lease: `leaseUntil` becomes now + `lease` (and `expiresAt` at least that).
 *
 * @since 0.1.0
 * @category models
 */
export interface ExtendRequest extends TokenRequest {
  readonly lease: Duration.Duration
}

/** The methods of the store service: `IdempotencyStore["Type"]`. */
export interface Service {
  /**
   * One atomic conditional write: creates the record, or takes over an expired lease or a FAILED
   * record created by the same fingerprint; otherwise returns the existing record.
   */
  readonly reserve: (request: ReserveRequest) => Effect.Effect<ReserveResult, StoreFailure>
  /** Records the outcome. */
  readonly complete: (request: CompleteRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  /** Deletes the record so the next attempt executes again. */
  readonly release: (request: TokenRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  /** Keeps a FAILED record that a retry may take over. */
  readonly markFailed: (request: MarkFailedRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  /** Extends the lease of a long call (a heartbeat). */
  readonly extend: (request: ExtendRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  /** Reads a record; an expired record reads as absent. */
  readonly get: (id: RecordId) => Effect.Effect<Option.Option<IdempotencyRecord>, StoreFailure>
  /** Deletes up to `limit` expired records and returns how many it deleted. */
  readonly purgeExpired: (options?: { readonly limit?: number | undefined }) => Effect.Effect<number, StoreFailure>
}
