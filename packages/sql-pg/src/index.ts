/**
 * @since 0.1.0
 */
export * as PgIdempotencyMigration from "./PgIdempotencyMigration.js"

/**
 * @since 0.1.0
 */
export * as PgIdempotencyStore from "./PgIdempotencyStore.js"

/**
 * @since 0.1.0
 */
export * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * @since 0.1.0
 */
export * as PgTransactional from "./PgTransactional.js"
