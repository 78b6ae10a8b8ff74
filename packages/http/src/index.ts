/**
 * @since 0.1.0
 */
export * as HttpIdempotency from "./HttpIdempotency.js"

/**
 * @since 0.1.0
 */
export * as HttpIdempotencyError from "./HttpIdempotencyError.js"

/**
 * @since 0.1.0
 */
export * as IdempotentFetch from "./IdempotentFetch.js"

/**
 * @since 0.1.0
 */
export * as StoredResponse from "./StoredResponse.js"

/**
 * @since 0.1.0
 */
export * as TimeLimit from "./TimeLimit.js"

/**
 * @since 0.1.0
 */
export * as WarmRuntime from "./WarmRuntime.js"
