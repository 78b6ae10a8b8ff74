/**
 * @since 0.1.0
 */
export * as Attempt from "./Attempt.js"

/**
 * @since 0.1.0
 */
export * as Fingerprint from "./Fingerprint.js"

/**
 * @since 0.1.0
 */
export * as Idempotency from "./Idempotency.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyAdmin from "./IdempotencyAdmin.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyContext from "./IdempotencyContext.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyEncryption from "./IdempotencyEncryption.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyError from "./IdempotencyError.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyKey from "./IdempotencyKey.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyPolicy from "./IdempotencyPolicy.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyRecord from "./IdempotencyRecord.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyStore from "./IdempotencyStore.js"

/**
 * @since 0.1.0
 */
export * as OutcomeCodec from "./OutcomeCodec.js"

/**
 * @since 0.1.0
 */
export * as StoreDeadlines from "./StoreDeadlines.js"

/**
 * @since 0.1.0
 */
export * as Tracing from "./Tracing.js"
