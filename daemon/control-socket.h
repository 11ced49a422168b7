/*
 * control-socket.h - the listening socket: listen, accept, read, shut
 * down, and the regions systemd passed with it (control-socket.c).
 */
#ifndef HPZD_CONTROL_SOCKET_H
#define HPZD_CONTROL_SOCKET_H

int		 control_listen(const char *path, int *from_systemd);
void		 control_retake(void);
int		 control_init(int listen_fd);
void		 control_shutdown(void);

#endif /* HPZD_CONTROL_SOCKET_H */
