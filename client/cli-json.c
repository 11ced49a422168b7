/*
 * cli-json.c - json-c for hpzctl and hpz-bench: hand a value to its
 * parent, or free it when the parent cannot take it.
 */
#include <json.h>

#include "cli.h"

/* Add v (NULL: null) under key; on failure v is freed.  0, or -1. */
int
cli_json_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		return (-1);
	}
	return (0);
}

/* Append v (NULL: null) to the array a; on failure v is freed. */
int
cli_json_push(struct json_object *a, struct json_object *v)
{
	if (json_object_array_add(a, v) != 0) {
		json_object_put(v);
		return (-1);
	}
	return (0);
}
