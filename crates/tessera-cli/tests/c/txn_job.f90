! An unmodified Fortran MPI-IO program for TESSERA_TXN=job (the mpi_f08 module): every rank
! writes its block of FILE (every byte VERSION) with one collective write, and closes the file.
!
!   txn_job_f FILE VERSION BLOCK          then MPI_Finalize
!   txn_job_f FILE VERSION BLOCK crash    the last rank dies before MPI_Finalize
!
! Exit status 0 on success; a message and MPI_Abort otherwise.
program txn_job_f
  use mpi_f08
  implicit none
  integer :: rank, nranks, version, block, ierr
  integer(kind=MPI_OFFSET_KIND) :: off
  character(len=4096) :: path, arg
  character(len=1), allocatable :: buf(:)
  type(MPI_File) :: fh

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (command_argument_count() < 3) then
    print *, 'usage: txn_job_f FILE VERSION BLOCK [crash]'
    call MPI_Abort(MPI_COMM_WORLD, 2)
  end if
  call get_command_argument(1, path)
  call get_command_argument(2, arg)
  read (arg, *) version
  call get_command_argument(3, arg)
  read (arg, *) block
  arg = ''
  if (command_argument_count() > 3) call get_command_argument(4, arg)
  allocate (buf(block))
  buf = achar(version)
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_WRONLY, &
                     MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) then
    print *, 'txn_job_f: open failed'
    call MPI_Abort(MPI_COMM_WORLD, 2)
  end if
  off = int(rank, MPI_OFFSET_KIND) * block
  call MPI_File_write_at_all(fh, off, buf, block, MPI_CHARACTER, MPI_STATUS_IGNORE, ierr)
  if (ierr /= MPI_SUCCESS) then
    print *, 'txn_job_f: write failed'
    call MPI_Abort(MPI_COMM_WORLD, 2)
  end if
  call MPI_File_close(fh)
  call MPI_Barrier(MPI_COMM_WORLD)
  if (trim(arg) == 'crash' .and. rank == nranks - 1) call abort()
  call MPI_Finalize()
  if (rank == 0) print '(a)', 'txn_job_f: finalized'
end program txn_job_f
