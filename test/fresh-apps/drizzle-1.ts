/** The drizzle-orm and drizzle-kit 1.0 release candidate the fresh apps move to: the first the package supports. */
export const DRIZZLE_1 = '1.0.0-rc.5'
