"""calls.recording_path: the call's recording file

Revision ID: 0003
Revises: 0002_admin
Create Date: 2026-11-25

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002_admin'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('calls') as batch_op:
        batch_op.add_column(sa.Column('recording_path', sa.String(length=1024), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('calls') as batch_op:
        batch_op.drop_column('recording_path')
