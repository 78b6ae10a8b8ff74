/**
 * The former name of `SqlStoreKit`: the same module, under the name it had before "engine" came to
 * mean only the attempt engine of `@effect-idempotency/core`.
 *
 * @deprecated Import `SqlStoreKit` instead; this name is removed at 1.0.
 * @since 0.1.0
 */
export * from "./SqlStoreKit.js"
