/**
 * @since 0.1.0
 */
export * as IdempotencyAdminApi from "./IdempotencyAdminApi.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyHttpApi from "./IdempotencyHttpApi.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyHttpClient from "./IdempotencyHttpClient.js"

/**
 * @since 0.1.0
 */
export * as IdempotencyMiddleware from "./IdempotencyMiddleware.js"
