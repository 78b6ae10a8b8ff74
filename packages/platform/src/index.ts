/**
 * @since 0.1.0
 */
export * as IdempotencyHttpClient from "./IdempotencyHttpClient.js"
