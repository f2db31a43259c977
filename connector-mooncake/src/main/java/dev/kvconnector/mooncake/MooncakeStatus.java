package dev.kvconnector.mooncake;

import dev.kvconnector.error.ErrorCode;
import dev.kvconnector.error.KVException;
import java.util.HashMap;
import java.util.Map;

/**
 * Mooncake Store's native error codes (negative {@code int32} values returned by the C ABI), each with the
 * kvconnector {@link ErrorCode} it becomes and a hint that says what to check.
 *
 * <p>Codes that this table does not name (a newer Mooncake) still map by their group of hundreds.
 */
public enum MooncakeStatus {
    /** -1: a NULL argument, or an exception escaped the native client. */
    INTERNAL_ERROR(-1, ErrorCode.INTERNAL, "the native client failed internally (or got a NULL argument); "
            + "its glog output (stderr) names the cause"),
    /** -10: a buffer was too small for the data. */
    BUFFER_OVERFLOW(-10, ErrorCode.STORE_ERROR, "a native buffer was too small for the data; check local_buffer_size "
            + "(buffer=) and the value's size"),
    /** -100. */
    SHARD_INDEX_OUT_OF_RANGE(-100, ErrorCode.INTERNAL, "the master's metadata shards disagree with the client: "
            + "check that client and master are the same Mooncake version"),
    /** -101: a segment that held a replica is gone. */
    SEGMENT_NOT_FOUND(-101, ErrorCode.STORE_UNREACHABLE, "is the peer's segment still mounted, or did a client die? "
            + "The master drops a dead client's segments after client_ttl (10 s by default)"),
    /** -102: a segment under this name is already mounted. */
    SEGMENT_ALREADY_EXISTS(-102, ErrorCode.INVALID_CONFIG, "another client already mounted a segment under this "
            + "local_hostname:port; give each client its own local_hostname or port, or wait client_ttl for a "
            + "crashed client's stale segment to go (or restart the master)"),
    /** -103: the master does not know this client. */
    CLIENT_NOT_FOUND(-103, ErrorCode.STORE_UNREACHABLE, "the master does not know this client: it was dropped after "
            + "client_ttl (a long pause, or the master restarted); reopen the store"),
    /** -200: no space in the pool. */
    NO_AVAILABLE_HANDLE(-200, ErrorCode.STORE_FULL, "is the pool full? Leased and hard-pinned objects are not evicted; "
            + "remove keys after use, add global_segment_size (segment=) on the clients, or retry later"),
    /** -300. */
    INVALID_VERSION(-300, ErrorCode.STORE_ERROR, "the object's version changed during the call (a concurrent remove "
            + "or put); retry"),
    /** -400. */
    INVALID_KEY(-400, ErrorCode.INVALID_ARGUMENT, "the key is empty or not acceptable to Mooncake"),
    /** -500. */
    WRITE_FAIL(-500, ErrorCode.IO_ERROR, "writing the object's replicas failed; check the segments' hosts are up"),
    /** -600: a parameter was rejected. */
    INVALID_PARAMS(-600, ErrorCode.INVALID_ARGUMENT, "Mooncake rejected a parameter: an empty local_hostname, "
            + "replica_num 0, a value larger than local_buffer_size, or an overlapping buffer registration"),
    /** -601. */
    ILLEGAL_CLIENT(-601, ErrorCode.STORE_UNREACHABLE, "the client is not set up, or the master no longer accepts it; "
            + "check that setup succeeded and the master did not restart"),
    /** -700. */
    INVALID_WRITE(-700, ErrorCode.STORE_ERROR, "the master refused the write (the object is being written or removed)"),
    /** -701. */
    INVALID_READ(-701, ErrorCode.STORE_ERROR, "the master refused the read (the object is being written or removed)"),
    /** -702. */
    INVALID_REPLICA(-702, ErrorCode.STORE_ERROR, "a replica descriptor was invalid; check client and master versions"),
    /** -703: the put is not finished. */
    REPLICA_IS_NOT_READY(-703, ErrorCode.BUSY, "the object's put has not finished yet; retry shortly"),
    /** -704: no such object. */
    OBJECT_NOT_FOUND(-704, ErrorCode.STORE_ERROR, "no such object: it was never put, was removed, or was evicted"),
    /** -705. */
    OBJECT_ALREADY_EXISTS(-705, ErrorCode.STORE_ERROR, "the object already exists; remove it first to replace it"),
    /** -706: the object is leased by a reader. */
    OBJECT_HAS_LEASE(-706, ErrorCode.BUSY, "a reader holds a lease on the object (is_exist and gets lease it for "
            + "default_kv_lease_ttl, 10 s by default); wait for it to end, or use lease-policy=force"),
    /** -707. */
    LEASE_EXPIRED(-707, ErrorCode.BUSY, "the read lease expired before the transfer finished; retry the read, or raise "
            + "the master's default_kv_lease_ttl"),
    /** -708. */
    OBJECT_HAS_REPLICATION_TASK(-708, ErrorCode.BUSY, "a replication task runs on the object; retry later"),
    /** -709. */
    OBJECT_NO_REPLICATION_TASK(-709, ErrorCode.STORE_ERROR, "no replication task exists for the object"),
    /** -710. */
    REPLICA_NOT_FOUND(-710, ErrorCode.STORE_ERROR, "the replica is gone: was its segment unmounted or its client dropped?"),
    /** -711. */
    REPLICA_ALREADY_EXISTS(-711, ErrorCode.STORE_ERROR, "the replica already exists on that segment"),
    /** -712. */
    REPLICA_IS_GONE(-712, ErrorCode.STORE_ERROR, "the replica was removed or evicted during the call; retry the read"),
    /** -713. */
    REPLICA_NOT_IN_LOCAL_MEMORY(-713, ErrorCode.STORE_ERROR, "the replica is not in this client's memory"),
    /** -714. */
    OBJECT_REPLICA_BUSY(-714, ErrorCode.BUSY, "the object's replicas are busy (being moved or written); retry later"),
    /** -800: the transfer engine failed. */
    TRANSFER_FAIL(-800, ErrorCode.IO_ERROR, "the transfer engine failed: is the buffer registered, can this host reach "
            + "the peer over the protocol (tcp/rdma), is MC_TCP_BIND_ADDRESS or local_hostname an address peers can "
            + "reach, and is the RDMA device (device=) right?"),
    /** -801. */
    CHECKSUM_MISMATCH(-801, ErrorCode.CORRUPT_OBJECT, "the transferred bytes failed their checksum; check the network "
            + "path and the peer's memory"),
    /** -900: an RPC to the master failed. */
    RPC_FAIL(-900, ErrorCode.STORE_UNREACHABLE, "is the master at master_server_address reachable? Check its host, port "
            + "(50051 by default), that mooncake_master runs, and firewalls or container networking"),
    /** -901: an RPC to the master timed out. */
    RPC_TIMEOUT(-901, ErrorCode.TIMEOUT, "the master did not answer in time: is master_server_address reachable and "
            + "the master not overloaded?"),
    /** -1000. */
    ETCD_OPERATION_ERROR(-1000, ErrorCode.STORE_UNREACHABLE, "an etcd operation failed: check the etcd endpoints of "
            + "the master's HA setup"),
    /** -1001. */
    ETCD_KEY_NOT_EXIST(-1001, ErrorCode.STORE_ERROR, "an etcd key is missing: is the HA master registered in etcd?"),
    /** -1002. */
    ETCD_TRANSACTION_FAIL(-1002, ErrorCode.STORE_ERROR, "an etcd transaction failed; retry"),
    /** -1003. */
    ETCD_CTX_CANCELLED(-1003, ErrorCode.TIMEOUT, "an etcd call was cancelled; check etcd's health"),
    /** -1004. */
    OPLOG_ENTRY_NOT_FOUND(-1004, ErrorCode.STORE_ERROR, "an HA oplog entry is missing"),
    /** -1005. */
    K8S_LEASE_OPERATION_ERROR(-1005, ErrorCode.STORE_UNREACHABLE, "a Kubernetes lease operation of the HA master failed"),
    /** -1006. */
    K8S_LEASE_NOT_FOUND(-1006, ErrorCode.STORE_ERROR, "the HA master's Kubernetes lease is missing"),
    /** -1007. */
    INCOMPLETE_OPLOG_CATCH_UP(-1007, ErrorCode.BUSY, "the standby master is still catching up; retry later"),
    /** -1010. */
    UNAVAILABLE_IN_CURRENT_STATUS(-1010, ErrorCode.BUSY, "the master cannot serve this now (for example during "
            + "leader election); retry later"),
    /** -1011. */
    UNAVAILABLE_IN_CURRENT_MODE(-1011, ErrorCode.UNSUPPORTED, "the master's mode does not offer this operation"),
    /** -1012. */
    NOT_SUPPORTED(-1012, ErrorCode.UNSUPPORTED, "this Mooncake build does not support the operation"),
    /** -1100. */
    FILE_NOT_FOUND(-1100, ErrorCode.IO_ERROR, "a file of the storage tier is missing; check the offload directory"),
    /** -1101. */
    FILE_OPEN_FAIL(-1101, ErrorCode.IO_ERROR, "a storage-tier file could not be opened: check its permissions"),
    /** -1102. */
    FILE_READ_FAIL(-1102, ErrorCode.IO_ERROR, "reading a storage-tier file failed; check the disk"),
    /** -1103. */
    FILE_WRITE_FAIL(-1103, ErrorCode.IO_ERROR, "writing a storage-tier file failed: is the disk full?"),
    /** -1104. */
    FILE_INVALID_BUFFER(-1104, ErrorCode.IO_ERROR, "a file transfer got an invalid buffer"),
    /** -1105. */
    FILE_LOCK_FAIL(-1105, ErrorCode.BUSY, "a storage-tier file is locked by another process; retry"),
    /** -1106. */
    FILE_INVALID_HANDLE(-1106, ErrorCode.IO_ERROR, "a storage-tier file handle is invalid"),
    /** -1200. */
    BUCKET_NOT_FOUND(-1200, ErrorCode.STORE_ERROR, "a storage bucket is missing"),
    /** -1201. */
    BUCKET_ALREADY_EXISTS(-1201, ErrorCode.STORE_ERROR, "the storage bucket already exists"),
    /** -1202. */
    KEYS_EXCEED_BUCKET_LIMIT(-1202, ErrorCode.STORE_FULL, "a storage bucket holds too many keys"),
    /** -1203. */
    KEYS_ULTRA_LIMIT(-1203, ErrorCode.STORE_FULL, "too many keys in one call or bucket"),
    /** -1300. */
    UNABLE_OFFLOAD(-1300, ErrorCode.STORE_FULL, "the object could not be offloaded to the storage tier"),
    /** -1301. */
    UNABLE_OFFLOADING(-1301, ErrorCode.BUSY, "an offload is in progress; retry later"),
    /** -1400. */
    TASK_NOT_FOUND(-1400, ErrorCode.STORE_ERROR, "the master knows no such task"),
    /** -1401. */
    TASK_PENDING_LIMIT_EXCEEDED(-1401, ErrorCode.BUSY, "too many pending tasks on the master; retry later"),
    /** -1402. */
    JOB_NOT_FOUND(-1402, ErrorCode.STORE_ERROR, "the master knows no such job"),
    /** -1500. */
    SERIALIZE_UNSUPPORTED(-1500, ErrorCode.UNSUPPORTED, "the master cannot serialise this state"),
    /** -1501. */
    SERIALIZE_FAIL(-1501, ErrorCode.STORE_ERROR, "serialising the master's state failed"),
    /** -1502. */
    DESERIALIZE_FAIL(-1502, ErrorCode.CORRUPT_OBJECT, "deserialising stored state failed: is it from another version?"),
    /** -1503. */
    PERSISTENT_FAIL(-1503, ErrorCode.IO_ERROR, "persisting the master's state failed; check its disk"),
    /** -1600. */
    DFS_NETWORK_TIMEOUT(-1600, ErrorCode.TIMEOUT, "the distributed file system timed out; check its network"),
    /** -1601. */
    DFS_SERVICE_UNAVAILABLE(-1601, ErrorCode.STORE_UNREACHABLE, "the distributed file system is unavailable"),
    /** -1602. */
    DFS_QUOTA_EXCEEDED(-1602, ErrorCode.STORE_FULL, "the distributed file system's quota is exhausted"),
    /** -1603. */
    DFS_PERMISSION_DENIED(-1603, ErrorCode.AUTH_FAILED, "the distributed file system denied access: check credentials"),
    /** -1604. */
    DFS_STALE_HANDLE(-1604, ErrorCode.IO_ERROR, "a distributed file system handle went stale; retry"),
    /** -1605. */
    DFS_PARTIAL_WRITE(-1605, ErrorCode.IO_ERROR, "a distributed file system write was partial; retry"),
    /** -1700. */
    TENANT_QUOTA_EXCEEDED(-1700, ErrorCode.STORE_FULL, "the tenant's quota is exhausted; remove keys or raise the quota"),
    /** -1701. */
    TENANT_NOT_REGISTERED(-1701, ErrorCode.INVALID_CONFIG, "the tenant is not registered with the master"),
    /** -1702. */
    TENANT_NOT_EMPTY(-1702, ErrorCode.STORE_ERROR, "the tenant still holds objects");

    private static final Map<Long, MooncakeStatus> BY_CODE = new HashMap<>();

    static {
        for (MooncakeStatus s : values()) {
            BY_CODE.put(s.nativeCode, s);
        }
    }

    private final long nativeCode;
    private final ErrorCode errorCode;
    private final String hint;

    MooncakeStatus(long nativeCode, ErrorCode errorCode, String hint) {
        this.nativeCode = nativeCode;
        this.errorCode = errorCode;
        this.hint = hint;
    }

    /** The native code, a negative number. */
    public long nativeCode() {
        return nativeCode;
    }

    /** The kvconnector error code this native code becomes. */
    public ErrorCode errorCode() {
        return errorCode;
    }

    /** What to check. */
    public String hint() {
        return hint;
    }

    /** The status with this native code, or null when this table does not name it. */
    public static MooncakeStatus of(long nativeCode) {
        return BY_CODE.get(nativeCode);
    }

    /** A name for any code, such as {@code NO_AVAILABLE_HANDLE(-200)} or {@code file error(-1107)}. */
    public static String describe(long nativeCode) {
        MooncakeStatus s = of(nativeCode);
        return (s != null ? s.name() : group(nativeCode)) + "(" + nativeCode + ")";
    }

    /**
     * The exception for a failed native call.
     *
     * @param nativeCode the negative code the call returned
     * @param maskedUri the store URI, secrets masked
     * @param operation the operation, such as {@code put}
     * @param key the key involved, or null
     * @param context what the hint should also name, such as the master's address, or null
     */
    public static KVException toException(long nativeCode, String maskedUri, String operation, String key,
                                          String context) {
        MooncakeStatus s = of(nativeCode);
        ErrorCode code = s != null ? s.errorCode : ErrorCode.STORE_ERROR;
        String hint = s != null ? s.hint : "Mooncake returned " + group(nativeCode) + " code " + nativeCode
                + ", which this version of kvconnector does not know; see Mooncake's types.h";
        if (context != null) {
            hint = hint + " (" + context + ")";
        }
        return KVException.of(code, "Mooncake returned " + describe(nativeCode))
                .store(maskedUri).operation(operation).key(key).nativeCode(nativeCode).hint(hint).build();
    }

    private static String group(long c) {
        if (c <= -1000 && c > -1100) {
            return "HA/etcd/mode error";
        } else if (c <= -1100 && c > -1200) {
            return "file error";
        } else if (c <= -1200 && c > -1300) {
            return "bucket error";
        } else if (c <= -1300 && c > -1400) {
            return "offload error";
        } else if (c <= -1400 && c > -1500) {
            return "task error";
        } else if (c <= -1500 && c > -1600) {
            return "serialization error";
        } else if (c <= -1600 && c > -1700) {
            return "DFS error";
        } else if (c <= -1700 && c > -1800) {
            return "tenant error";
        }
        return "unknown error";
    }
}
