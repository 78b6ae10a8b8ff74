/**
 * @since 0.1.0
 */
export * as IdempotentActivity from "./IdempotentActivity.js"
