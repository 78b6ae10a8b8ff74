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
 * @deprecated The former name of `SqlStoreKit`; removed at 1.0.
 * @since 0.1.0
 */
export * as SqlStoreEngine from "./SqlStoreEngine.js"

/**
 * @since 0.1.0
 */
export * as SqlStoreKit from "./SqlStoreKit.js"

/**
 * @since 0.1.0
 */
export * as SqlTransactional from "./SqlTransactional.js"
