/**
 * @since 0.1.0
 */
export * as D1SqlClient from "./D1SqlClient.js"

/**
 * @since 0.1.0
 */
export * as DurableObjectSqlClient from "./DurableObjectSqlClient.js"

/**
 * @since 0.1.0
 */
export * as SqlIdempotencyMigration from "./SqlIdempotencyMigration.js"

/**
 * @since 0.1.0
 */
export * as SqlIdempotencyStore from "./SqlIdempotencyStore.js"

/**
 * @since 0.1.0
 */
export * as SqlIdempotencyTable from "./SqlIdempotencyTable.js"

/**
 * @since 0.1.0
 */
export * as SqlStoreEngine from "./SqlStoreEngine.js"

/**
 * @since 0.1.0
 */
export * as SqlTransactional from "./SqlTransactional.js"
