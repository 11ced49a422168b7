/*
 * fault.h - a fault's resolution on a worker (fault.c).
 */
#ifndef HPZD_FAULT_H
#define HPZD_FAULT_H

struct work;
struct worker;

void		 fault_handle(struct worker *, struct work *);
void		 fault_work_cancel(struct work *);

#endif /* HPZD_FAULT_H */
