package dev.kvconnector.proxy;

import java.util.ArrayList;
import java.util.List;

/**
 * The instances of each role. Reads take an immutable snapshot without locking; the rare admin edits copy
 * the list of the role they name (and only that role: vLLM's demo removed failed prefill nodes from the
 * wrong list).
 */
final class InstancePool {
    private volatile List<Instance> prefill = List.of();
    private volatile List<Instance> decode = List.of();

    InstancePool(List<String> prefillAddresses, List<String> decodeAddresses) {
        for (String a : prefillAddresses) {
            add(Role.PREFILL, HostPort.parse(a));
        }
        for (String a : decodeAddresses) {
            add(Role.DECODE, HostPort.parse(a));
        }
    }

    List<Instance> list(Role role) {
        return role == Role.PREFILL ? prefill : decode;
    }

    List<Instance> all() {
        List<Instance> out = new ArrayList<>(prefill);
        out.addAll(decode);
        return out;
    }

    /** Adds the address to the role; returns the new instance, or null when the role already has it. */
    synchronized Instance add(Role role, HostPort address) {
        List<Instance> current = list(role);
        for (Instance i : current) {
            if (i.address.equals(address)) {
                return null;
            }
        }
        Instance added = new Instance(role, address);
        List<Instance> next = new ArrayList<>(current);
        next.add(added);
        publish(role, next);
        return added;
    }

    /** Removes the address from the role only; returns the removed instance, or null when absent. */
    synchronized Instance remove(Role role, HostPort address) {
        List<Instance> next = new ArrayList<>(list(role));
        for (int k = 0; k < next.size(); k++) {
            if (next.get(k).address.equals(address)) {
                Instance removed = next.remove(k);
                publish(role, next);
                return removed;
            }
        }
        return null;
    }

    boolean contains(Role role, HostPort address) {
        for (Instance i : list(role)) {
            if (i.address.equals(address)) {
                return true;
            }
        }
        return false;
    }

    private void publish(Role role, List<Instance> next) {
        List<Instance> frozen = List.copyOf(next);
        if (role == Role.PREFILL) {
            prefill = frozen;
        } else {
            decode = frozen;
        }
    }
}
