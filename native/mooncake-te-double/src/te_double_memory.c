/* Registered local memory of the Transfer Engine TEST DOUBLE: what peers may write and read. */
#include "te_double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int location_valid(const char *location) {
    if (location == NULL) {
        return 0;
    }
    if (strcmp(location, "*") == 0) {
        return 1;
    }
    const char *digits = NULL;
    if (strncmp(location, "cpu:", 4) == 0) {
        digits = location + 4;
    } else if (strncmp(location, "cuda:", 5) == 0) {
        digits = location + 5;
    } else {
        return 0;
    }
    if (*digits == '\0' || strlen(location) >= TE_LOCATION_MAX) {
        return 0;
    }
    for (; *digits; digits++) {
        if (*digits < '0' || *digits > '9') {
            return 0;
        }
    }
    return 1;
}

static int overlaps(struct engine *e, uintptr_t addr, size_t length) {
    for (struct registration *r = e->registrations; r != NULL; r = r->next) {
        if (addr < r->addr + r->length && r->addr < addr + length) {
            return 1;
        }
    }
    return 0;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                        int remote_accessible) {
    (void)remote_accessible;
    struct engine *e = engine;
    if (e == NULL || addr == NULL || length == 0 || (uintptr_t)addr + length < (uintptr_t)addr) {
        return TE_ERR;
    }
    if (!location_valid(location)) {
        fprintf(stderr, TE_LOG_PREFIX "registerLocalMemory: unknown location '%s' (cpu:N, cuda:N or *)\n",
                location == NULL ? "(null)" : location);
        return TE_ERR;
    }
    struct registration *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return TE_ERR;
    }
    r->addr = (uintptr_t)addr;
    r->length = length;
    snprintf(r->location, sizeof r->location, "%s", location);
    pthread_rwlock_wrlock(&e->registrations_lock);
    if (overlaps(e, r->addr, length)) {
        pthread_rwlock_unlock(&e->registrations_lock);
        free(r);
        return TE_ERR_ADDRESS_OVERLAPPED;
    }
    r->next = e->registrations;
    e->registrations = r;
    pthread_rwlock_unlock(&e->registrations_lock);
    return 0;
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr) {
    struct engine *e = engine;
    if (e == NULL) {
        return TE_ERR;
    }
    /* The write lock waits for every peer copy into or out of registered memory to finish. */
    pthread_rwlock_wrlock(&e->registrations_lock);
    for (struct registration **p = &e->registrations; *p != NULL; p = &(*p)->next) {
        if ((*p)->addr == (uintptr_t)addr) {
            struct registration *gone = *p;
            *p = gone->next;
            pthread_rwlock_unlock(&e->registrations_lock);
            free(gone);
            return 0;
        }
    }
    pthread_rwlock_unlock(&e->registrations_lock);
    return TE_ERR;
}

int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list, size_t buffer_len,
                             const char *location) {
    if (buffer_list == NULL && buffer_len > 0) {
        return TE_ERR;
    }
    for (size_t i = 0; i < buffer_len; i++) {
        int rc = registerLocalMemory(engine, buffer_list[i].addr, buffer_list[i].length, location, 1);
        if (rc != 0) {
            for (size_t j = 0; j < i; j++) {
                unregisterLocalMemory(engine, buffer_list[j].addr);
            }
            return rc;
        }
    }
    return 0;
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len) {
    if (addr_list == NULL && addr_len > 0) {
        return TE_ERR;
    }
    int result = 0;
    for (size_t i = 0; i < addr_len; i++) {
        int rc = unregisterLocalMemory(engine, addr_list[i]);
        if (rc != 0) {
            result = rc;
        }
    }
    return result;
}

/* Whether [addr, addr + length) lies inside one registration; the caller holds the read lock. */
int memory_covers(struct engine *e, uint64_t addr, uint64_t length) {
    for (struct registration *r = e->registrations; r != NULL; r = r->next) {
        if (addr >= r->addr && length <= r->length && addr - r->addr <= r->length - length) {
            return 1;
        }
    }
    return 0;
}

void memory_free_all(struct engine *e) {
    while (e->registrations != NULL) {
        struct registration *next = e->registrations->next;
        free(e->registrations);
        e->registrations = next;
    }
}

int kvc_te_double_registration_location(transfer_engine_t engine, const void *addr, char *buf, size_t buf_len) {
    struct engine *e = engine;
    if (e == NULL || buf == NULL) {
        return TE_ERR;
    }
    int rc = TE_ERR;
    pthread_rwlock_rdlock(&e->registrations_lock);
    for (struct registration *r = e->registrations; r != NULL; r = r->next) {
        if ((uintptr_t)addr >= r->addr && (uintptr_t)addr < r->addr + r->length) {
            if (strlen(r->location) < buf_len) {
                memcpy(buf, r->location, strlen(r->location) + 1);
                rc = 0;
            }
            break;
        }
    }
    pthread_rwlock_unlock(&e->registrations_lock);
    return rc;
}
