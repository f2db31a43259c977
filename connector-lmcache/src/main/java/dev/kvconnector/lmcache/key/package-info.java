/** LMCache v1 key strings ({@link dev.kvconnector.lmcache.key.LmcacheV1Keys}). */
package dev.kvconnector.lmcache.key;
