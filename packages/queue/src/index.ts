/**
 * @since 0.1.0
 */
export * as IdempotentConsumer from "./IdempotentConsumer.js"
