/**
 * @since 0.1.0
 */
export * as StoreConformance from "./StoreConformance.js"
