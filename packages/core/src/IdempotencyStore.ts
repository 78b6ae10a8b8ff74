/**
 * The store service: one interface, many Layers (memory, PostgreSQL, DynamoDB). The protocol code
 * never knows which one it talks to.
 *
 * Every write after `reserve` is conditional on the fencing token: it succeeds only while the
 * record is IN_PROGRESS and holds the caller's token, and fails with `LeaseLost` otherwise.
 * Store failures are typed (`StoreUnavailable` for connectivity, `StoreError` otherwise), never
 * defects.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as cache from "./store/cache.js"
import * as memory from "./store/memory.js"
import type * as service from "./store/service.js"

/**
 * A reservation request.
 *
 * @since 0.1.0
 * @category models
 */
export type ReserveRequest = service.ReserveRequest

/**
 * A token-checked write request.
 *
 * @since 0.1.0
 * @category models
 */
export type TokenRequest = service.TokenRequest

/**
 * Completion: the record becomes COMPLETED with `outcome`, and lives for `ttl` from now.
 *
 * @since 0.1.0
 * @category models
 */
export type CompleteRequest = service.CompleteRequest

/**
 * Marking failed: the record becomes FAILED for `ttl` from now; a retry with the same
 * fingerprint takes it over.
 *
 * @since 0.1.0
 * @category models
 */
export type MarkFailedRequest = service.MarkFailedRequest

/**
 * Extending the lease: `leaseUntil` becomes now + `lease` (and `expiresAt` at least that).
 *
 * @since 0.1.0
 * @category models
 */
export type ExtendRequest = service.ExtendRequest

/**
 * The store service: `reserve`, then token-checked `complete`, `release`, `markFailed` and
 * `extend`; `get` and `purgeExpired`.
 *
 * @since 0.1.0
 * @category tags
 */
export class IdempotencyStore extends Context.Tag("@effect-idempotency/core/IdempotencyStore")<
  IdempotencyStore,
  service.Service
>() {}

/**
 * Which clock decides lease and TTL expiry, for a store that has a clock of its own.
 *
 * - `"server"`: the store server's clock (PostgreSQL's `statement_timestamp()`, Redis's `TIME`),
 *   read by each statement. Every function instance shares it, so a skewed instance clock can
 *   neither take over a live lease early nor keep a dead one blocked.
 * - `"effect"`: the fiber's `Clock`, sent with each call. Instances must then agree on time; use it
 *   in tests with `TestClock`, or when expiry must follow the application's clock.
 *
 * Stores without a server clock (memory, DynamoDB) always use Effect's `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export type ClockSource = "server" | "effect"

/**
 * Options of the memory store.
 *
 * @since 0.1.0
 * @category models
 */
export type MemoryOptions = memory.MemoryOptions

/**
 * Builds a memory store. Correct under any number of concurrent fibers; expiry and leases are
 * read from `Clock`, so `TestClock` drives them. It lives in one process: use it for tests, local
 * development and the embedded default, never across function instances.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: (options?: MemoryOptions) => Effect.Effect<IdempotencyStore["Type"]> = memory.make

/**
 * Options of the background purge.
 *
 * @since 0.1.0
 * @category models
 */
export interface PurgeOptions {
  /** How many expired records each round deletes at most. Default: the store's own limit. */
  readonly limit?: number | undefined
}

/**
 * Deletes expired records of the `IdempotencyStore` of the context in a background fiber, for the
 * life of the layer: one `purgeExpired` call at once, then one every `interval`. A failed round is
 * logged as a warning and the next one runs on schedule; the purge never fails the layer. Time is
 * read through `Clock`, so `TestClock` drives it in tests.
 *
 * It works with every store. Keep the store in the output with `Layer.provideMerge`:
 *
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { Layer } from "effect"
 *
 * const StoreLive = IdempotencyStore.layerPurge("5 minutes", { limit: 1000 }).pipe(
 *   Layer.provideMerge(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * The stores' `purgeInterval` and `purgeLimit` options are this layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPurge = (
  interval: Duration.DurationInput,
  options?: PurgeOptions
): Layer.Layer<never, never, IdempotencyStore> =>
  Layer.scopedDiscard(
    Effect.flatMap(IdempotencyStore, (store) => Effect.forkScoped(memory.purgeLoop(store, interval, options)))
  )

/**
 * Adds `layerPurge` to a store layer when `purgeInterval` is set; the store's layer otherwise.
 * For store packages whose `layerWith` takes `purgeInterval` and `purgeLimit`.
 *
 * @since 0.1.0
 * @category layers
 */
export const withPurge = <E, R>(
  store: Layer.Layer<IdempotencyStore, E, R>,
  options: {
    readonly purgeInterval?: Duration.DurationInput | undefined
    readonly purgeLimit?: number | undefined
  } | undefined
): Layer.Layer<IdempotencyStore, E, R> =>
  options?.purgeInterval === undefined
    ? store
    : Layer.provideMerge(layerPurge(options.purgeInterval, { limit: options.purgeLimit }), store)

/**
 * A memory store layer, with options (a background purge with `purgeInterval`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryWith = (options?: MemoryOptions): Layer.Layer<IdempotencyStore> =>
  withPurge(Layer.effect(IdempotencyStore, memory.make(options)), options)

/**
 * A memory store layer (it logs a warning that it is per-process).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore> = layerMemoryWith()

/**
 * Options of the warm-instance cache.
 *
 * @since 0.1.0
 * @category models
 */
export type CacheOptions = cache.CacheOptions

/**
 * Wraps a store with a warm-instance cache of completed outcomes: a replay of a key this instance
 * has seen completed (its own completion, or one a reservation returned) is answered from memory
 * with no round trip.
 *
 * The copy is exact: no store method changes a COMPLETED record before it expires. The copy's
 * expiry is measured on this instance's clock from before the request that produced it, so it
 * never outlives the record. Only COMPLETED records are cached; conflicts and takeovers always ask
 * the store. At most `capacity` records are kept, the least recently used evicted first.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCached: (
  store: IdempotencyStore["Type"],
  options?: CacheOptions
) => Effect.Effect<IdempotencyStore["Type"]> = cache.make

/**
 * The warm-instance cache (see `makeCached`) over the `IdempotencyStore` of the context.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { Layer } from "effect"
 *
 * // any store's layer: PostgreSQL, DynamoDB, Redis or memory
 * const StoreLive = IdempotencyStore.layerMemory
 *
 * const CachedStoreLive = IdempotencyStore.layerCached({ capacity: 1000 }).pipe(Layer.provide(StoreLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerCached = (options?: CacheOptions): Layer.Layer<IdempotencyStore, never, IdempotencyStore> =>
  Layer.effect(IdempotencyStore, Effect.flatMap(IdempotencyStore, (store) => makeCached(store, options)))
