/*
 * mappers.h - look for other processes that map a file (mappers.c).
 * Not installed; built into libhpz and the preload library.
 */
#ifndef HPZ_MAPPERS_H
#define HPZ_MAPPERS_H

#include <stdint.h>
#include <sys/types.h>

pid_t	mappers_other(int fd, uint64_t off, uint64_t len);

#endif /* HPZ_MAPPERS_H */
