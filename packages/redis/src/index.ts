/**
 * @since 0.1.0
 */
export * as RedisClient from "./RedisClient.js"

/**
 * @since 0.1.0
 */
export * as RedisStore from "./RedisStore.js"

/**
 * @since 0.1.0
 */
export * as RedisScripts from "./RedisScripts.js"
