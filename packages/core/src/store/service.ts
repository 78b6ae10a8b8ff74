// The store's methods and requests, below `IdempotencyStore` (which re-exports them) so that the memory store and the cache need nothing of it.
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { LeaseLost, StoreFailure } from "../IdempotencyError.js"
import type { IdempotencyRecord, RecordId, ReserveResult, StoredOutcome } from "../IdempotencyRecord.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface ReserveRequest {
  readonly id: RecordId
  /** The fencing token the caller holds if the reservation succeeds. */
  readonly token: string
  readonly fingerprint: string
  readonly lease: Duration.Duration
  /** At least as long as the lease. */
  readonly ttl: Duration.Duration
  /** Whether an IN_PROGRESS record whose lease ended may be taken over (`false` under `markUnknown`). */
  readonly takeover: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface TokenRequest {
  readonly id: RecordId
  readonly token: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CompleteRequest extends TokenRequest {
  readonly outcome: StoredOutcome
  readonly ttl: Duration.Duration
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MarkFailedRequest extends TokenRequest {
  readonly ttl: Duration.Duration
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ExtendRequest extends TokenRequest {
  readonly lease: Duration.Duration
}

/** The methods of the store service: `IdempotencyStore["Type"]` (README.md#records-leases-and-fencing). */
export interface Service {
  readonly reserve: (request: ReserveRequest) => Effect.Effect<ReserveResult, StoreFailure>
  readonly complete: (request: CompleteRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  readonly release: (request: TokenRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  readonly markFailed: (request: MarkFailedRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  readonly extend: (request: ExtendRequest) => Effect.Effect<void, LeaseLost | StoreFailure>
  readonly get: (id: RecordId) => Effect.Effect<Option.Option<IdempotencyRecord>, StoreFailure>
  /** Deletes up to `limit` expired records and returns how many. */
  readonly purgeExpired: (options?: { readonly limit?: number | undefined }) => Effect.Effect<number, StoreFailure>
}
